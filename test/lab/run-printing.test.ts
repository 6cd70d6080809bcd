// runPrinting (lab/cluster/images/buildah.ts): a command that printed nothing
// is run again, at most `tries` times; a failure is not retried.
import t from 'tap';
import { runPrinting } from '../../lab/cluster/images/buildah.ts';

const outputs = (...outs: string[]) => {
  let calls = 0;
  return { f: async () => outs[calls++] ?? '', calls: () => calls };
};

t.test('empty output: run again until something is printed', async (t) => {
  const o = outputs('', '', 'usage: x\n');
  t.equal(await runPrinting(o.f), 'usage: x\n');
  t.equal(o.calls(), 3);
});

t.test('printed at once: run once', async (t) => {
  const o = outputs('v1\n', 'never');
  t.equal(await runPrinting(o.f), 'v1\n');
  t.equal(o.calls(), 1);
});

t.test('still empty after every try: empty, and no more tries', async (t) => {
  const o = outputs();
  t.equal(await runPrinting(o.f, 3), '');
  t.equal(o.calls(), 3);
});

t.test('a failing command is not retried', async (t) => {
  let calls = 0;
  await t.rejects(
    runPrinting(async () => {
      calls++;
      throw new Error('exit 1');
    }),
    /exit 1/,
  );
  t.equal(calls, 1);
});
