// The agent's parts (src/agent/components.ts): started in the order of the
// list, stopped in the reverse order; a part that fails to start stops the
// ones started before it (of earlier lists too) and the error reaches the
// caller; a part that fails to stop is reported and the others still stop.
import t from 'tap';
import { type Component, Components } from '../../src/agent/components.ts';

/** A part that writes what happens to it into `journal`; `fail` makes its start or its stop throw. */
function part(name: string, journal: string[], fail?: 'start' | 'stop' | 'start async'): Component {
  return {
    name,
    start() {
      if (fail === 'start') throw new Error(`${name} cannot start`);
      if (fail === 'start async') return Promise.reject(new Error(`${name} cannot start`));
      // An asynchronous part: the next one starts only once this one has.
      if (name.startsWith('async')) return Promise.resolve().then(() => void journal.push(`start ${name}`));
      journal.push(`start ${name}`);
      return undefined;
    },
    stop() {
      journal.push(`stop ${name}`);
      if (fail === 'stop') throw new Error(`${name} cannot stop`);
    },
  };
}

const noErrors = (t: { fail(message: string): unknown }) => (name: string, err: unknown) =>
  t.fail(`${name} failed to stop: ${String(err)}`);

t.test('parts start in order and stop in the reverse order, across lists', async (t) => {
  const journal: string[] = [];
  const parts = new Components(noErrors(t));
  await parts.start([part('datapath', journal)]);
  await parts.start([part('a', journal), part('async b', journal), part('c', journal)]);
  t.same(journal, ['start datapath', 'start a', 'start async b', 'start c']);
  journal.length = 0;
  parts.stop();
  t.same(journal, ['stop c', 'stop async b', 'stop a', 'stop datapath']);
  journal.length = 0;
  parts.stop();
  t.same(journal, [], 'a second stop stops nothing again');
});

for (const fail of ['start', 'start async'] as const) {
  t.test(`a part whose ${fail} fails stops those started before it, the last first, and the error is rethrown`, async (t) => {
    const journal: string[] = [];
    const parts = new Components(noErrors(t));
    await parts.start([part('datapath', journal)]);
    await t.rejects(parts.start([part('a', journal), part('b', journal), part('broken', journal, fail), part('never', journal)]), {
      message: 'broken cannot start',
    });
    t.same(
      journal,
      ['start datapath', 'start a', 'start b', 'stop b', 'stop a', 'stop datapath'],
      'neither the failed part nor those after it are stopped or started',
    );
    journal.length = 0;
    parts.stop();
    t.same(journal, [], 'nothing is left to stop');
  });
}

t.test('a part that fails to stop is reported and the others still stop', async (t) => {
  const journal: string[] = [];
  const reported: Array<[string, string]> = [];
  const parts = new Components((name, err) => reported.push([name, (err as Error).message]));
  await parts.start([part('a', journal), part('broken', journal, 'stop'), part('c', journal)]);
  journal.length = 0;
  parts.stop();
  t.same(journal, ['stop c', 'stop broken', 'stop a']);
  t.same(reported, [['broken', 'broken cannot stop']]);
});

t.test('a part that fails to stop while a failed start unwinds is reported, and the start error is the one thrown', async (t) => {
  const journal: string[] = [];
  const reported: string[] = [];
  const parts = new Components((name) => reported.push(name));
  await t.rejects(parts.start([part('a', journal), part('sticky', journal, 'stop'), part('broken', journal, 'start')]), {
    message: 'broken cannot start',
  });
  t.same(journal, ['start a', 'start sticky', 'stop sticky', 'stop a']);
  t.same(reported, ['sticky']);
});
