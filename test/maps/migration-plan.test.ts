// Which pinned maps the migration on start moves (src/maps/migration/plan.ts),
// against a map pinned by hand in a pin directory of this test's own: one
// that fits stays, another capacity asked for or the test layout moves
// (from the layout it is found to have), and a layout this build never
// recorded stops the agent with what to do.
import { mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { claimPinDir, ensureBpffs } from '../../lab/pins.ts';
import { compileBpf } from '../../src/bpf/compile.ts';
import { BpfMap } from '../../src/bpf/map.ts';
import { BpfObject } from '../../src/bpf/object.ts';
import { LAYOUTS, TEST_LAYOUTS } from '../../src/maps/generated/layouts.gen.ts';
import { UnknownLayoutError, planMigration } from '../../src/maps/migration/plan.ts';
import { backendsMap } from '../../src/maps/registry.ts';

ensureBpffs();
const pins = claimPinDir('plan');
mkdirSync(pins.dir, { recursive: true });
const sock = BpfObject.open(compileBpf({ program: 'sock' }).path, pins.dir);
t.teardown(() => {
  sock.close();
  pins.release();
});

const path = join(pins.dir, backendsMap.name);
/** Pins svcmap_be with this value size and capacity in the test's directory, alone. */
function pinBackends(valueSize: number, maxEntries: number): void {
  rmSync(path, { force: true });
  const l = LAYOUTS[backendsMap.name]![1]!;
  const m = BpfMap.create(l.type, backendsMap.name, l.keySize, valueSize, maxEntries, l.flags);
  try {
    m.pin(path);
  } finally {
    m.close();
  }
}
const plan = (maxBackends?: number) => planMigration([sock], pins.dir, (name) => (name === backendsMap.name ? maxBackends : undefined));

t.test('a pinned map of this layout and capacity stays; without a --max-* option, any capacity does', async (t) => {
  pinBackends(12, 1000);
  t.same(plan(1000), []);
  t.same(plan(), [], 'no option: the pinned capacity is kept');
});

t.test('another capacity asked for moves it, layout to the same layout', async (t) => {
  pinBackends(12, 1000);
  const [move, ...rest] = plan(2000);
  t.same(rest, []);
  t.match(move, {
    pinPath: path,
    newPinPath: join(pins.dir, 'migrating', backendsMap.name),
    from: { version: 1 },
    to: { version: 1 },
    fromMaxEntries: 1000,
    toMaxEntries: 2000,
    why: 'capacity 1000 -> 2000',
  });
});

t.test("the test layout's map is found by its shape and moves back to this build's", async (t) => {
  pinBackends(TEST_LAYOUTS[backendsMap.name]!.valueSize, 1000);
  const [move] = plan();
  t.match(move, {
    from: { version: 'test' },
    to: { version: 1 },
    fromMaxEntries: 1000,
    toMaxEntries: 1000,
    why: 'the test layout -> layout version 1',
  });
});

t.test('a layout no build recorded stops the agent, naming what it knows and what to do', async (t) => {
  pinBackends(40, 1000);
  t.throws(() => plan(), UnknownLayoutError);
  t.throws(
    () => plan(),
    new RegExp(
      `the map pinned at ${path} has a layout this build does not know \\(hash, flags 1, key 4 bytes, value 40 bytes; it converts from version 1: hash, flags 1, key 4 bytes, value 12 bytes; the test layout: .*value 16 bytes\\).*The old datapath keeps serving; start the release that made it, or remove the datapath with svcmap cleanup --pin-dir ${pins.dir}`,
    ),
  );
});
