// The collection after a full sync that grew the heap (src/agent/loops/heap.ts):
// when it runs, that it runs once per growth, and that it is V8's
// memory-reducing kind. The gc function and the heap size are the test's, so
// nothing here depends on the real heap; the real effect on RSS is measured
// by test/agent/memory-probe.ts and make bench.
import { pino } from 'pino';
import t from 'tap';
import { HeapReclaimer, RECLAIM_GROWTH_BYTES } from '../../src/agent/loops/heap.ts';

const MiB = 2 ** 20;
const turn = () => new Promise((r) => setImmediate(r));

function setup(gc: ((o: unknown) => void) | undefined, trims: string[] = []) {
  const logs: Array<{ msg: string; heapTotalMiB?: number[] }> = [];
  const log = pino({ level: 'info' }, { write: (line: string) => logs.push(JSON.parse(line) as { msg: string }) });
  let heapTotal = 0;
  const r = new HeapReclaimer(
    log,
    gc,
    () => heapTotal,
    () => (trims.push('trim'), true),
  );
  return { r, logs, setHeap: (n: number) => (heapTotal = n) };
}

t.test('collects once after a full sync that grew the heap, not again until it grows again', async (t) => {
  const calls: unknown[] = [];
  const { r, logs, setHeap } = setup((o) => calls.push(o), calls as string[]);
  t.ok(r.available);
  setHeap(RECLAIM_GROWTH_BYTES - 1);
  r.afterFullSync();
  await turn();
  t.equal(calls.length, 0, 'a heap that grew less than the threshold: no collection');

  setHeap(300 * MiB);
  r.afterFullSync();
  r.afterFullSync(); // a second full sync before it ran: still one collection
  t.equal(calls.length, 0, 'not within the sync itself');
  await turn();
  t.same(
    calls,
    [{ type: 'major', execution: 'sync', flavor: 'last-resort' }, 'trim'],
    "one memory-reducing collection ('last-resort'), then malloc is trimmed",
  );
  t.equal(logs.filter((l) => l.msg === 'heap reclaimed after a full sync').length, 1, 'logged once');

  // The fake heap stays at 300 MiB, which is now the baseline.
  r.afterFullSync();
  await turn();
  t.equal(calls.length, 2, 'no growth since the last collection: none');
  setHeap(300 * MiB + RECLAIM_GROWTH_BYTES);
  r.afterFullSync();
  await turn();
  t.equal(calls.length, 4, 'grown again: collects (and trims) again');
});

t.test('without --expose-gc nothing is done', async (t) => {
  const { r, logs, setHeap } = setup(undefined);
  t.notOk(r.available);
  setHeap(1024 * MiB);
  r.afterFullSync();
  await turn();
  t.same(logs, []);
});
