// The constants the datapath and the agent share are declared once, in the
// headers under bpf/include/; src/maps/generated/constants.gen.ts is what
// mk/gen-constants.ts makes of them, and what stands beside it in
// src/maps/constants.ts (names, labels) must cover every value.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { GENERATED, generateConstants } from '../../mk/gen-constants.ts';
import * as k from '../../src/maps/constants.ts';

const exported = (prefix: string) =>
  Object.entries(k as Record<string, unknown>).filter((e): e is [string, number] => e[0].startsWith(prefix) && typeof e[1] === 'number');

t.test('the committed generated module is what the headers generate (make constants)', async (t) => {
  t.equal(readFileSync(GENERATED, 'utf8'), generateConstants(), 'src/maps/generated/constants.gen.ts is up to date');
});

t.test('the generator reads every header under the folder, defines and enums', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'svcmap-gen-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(
    join(dir, 'a.h'),
    [
      '#ifndef A_H',
      '#define A_H',
      '#define SOME_MAP some_map',
      '#define SIZE 0x40U /* a size */',
      '#define TWICE (SIZE * 2)',
      '#define BIG 9000000000ULL',
      '#define NAME "x"',
      '#define FN(x) ((x) + 1)',
      'enum e {',
      '\tE_A = 3, /* first */',
      '\tE_B,',
      '};',
      '#endif',
    ].join('\n'),
  );
  writeFileSync(join(dir, 'b.h'), '#define MOVED_HERE 7\n#define SIZE 64\n#define LATER_TWICE (LATER * 2)\n#define LATER_NAME LATER\n');
  writeFileSync(join(dir, 'c.h'), '#define LATER 5\n');
  const out = generateConstants(dir);
  t.match(out, "export const SOME_MAP = 'some_map';");
  t.match(out, '/** a size */\nexport const SIZE = 0x40;');
  t.match(out, 'export const TWICE = (SIZE * 2);');
  t.match(out, 'export const BIG = 9000000000;');
  t.match(out, "export const NAME = 'x';");
  t.match(out, '/** first */\nexport const E_A = 3;\nexport const E_B = 4;');
  t.match(out, 'export const MOVED_HERE = 7;');
  t.match(out, 'export const LATER_TWICE = 10;', 'a constant of a header read later, by its value');
  t.match(out, 'export const LATER_NAME = 5;');
  t.match(out, /\/c\.h\nexport const LATER = 5;/, "and that constant in its own header's part");
  t.notMatch(out, /A_H|FN/, 'no include guard, no function-like macro');
  t.equal(out.match(/export const SIZE /g)?.length, 1, 'a constant defined twice alike is generated once');
  writeFileSync(join(dir, 'b.h'), '#define SIZE 65\n');
  t.throws(() => generateConstants(dir), /SIZE is 65 here and 0x40 before/);
});

t.test('map names fit the kernel limit', async (t) => {
  const names = Object.entries(k).filter(([n]) => n.startsWith('SVCMAP_MAP_'));
  t.ok(names.length >= 28);
  for (const [macro, name] of names)
    t.ok(typeof name === 'string' && name.length <= 15, `${macro}: ${String(name)} has at most 15 characters`);
});

t.test('every SVC_F_ flag has a display name', async (t) => {
  t.same(
    k.SVC_FLAG_NAMES.map(([b]) => b).sort((a, b) => a - b),
    exported('SVC_F_')
      .map(([, v]) => v)
      .sort((a, b) => a - b),
  );
});

t.test('every LB_ALG_ id has exactly one name', async (t) => {
  const ids = Object.values(k.LB_ALGORITHMS);
  t.same(
    [...ids].sort(),
    exported('LB_ALG_')
      .map(([, v]) => v)
      .sort(),
    'LB_ALGORITHMS names every id once',
  );
  for (const id of ids) t.equal(k.LB_ALGORITHMS[k.lbAlgorithmName(id)!], id, `id ${id} round-trips through its name`);
  t.ok(
    ids.every((id) => id >= 0 && id <= 0xff),
    'every id fits svc_value.algorithm (a __u8)',
  );
});

t.test('the CT_F_ flags are distinct bits that fit ct_value.flags (a __u8), each with a display name', async (t) => {
  const bits = exported('CT_F_').map(([, v]) => v);
  for (const b of bits) t.ok(b > 0 && b <= 0xff && (b & (b - 1)) === 0, `0x${b.toString(16)} is one bit of a byte`);
  t.equal(
    bits.reduce((a, b) => a | b, 0),
    bits.reduce((a, b) => a + b, 0),
    'no two flags share a bit',
  );
  t.same(
    k.CT_FLAG_NAMES.map(([b]) => b).sort((a, b) => a - b),
    [...bits].sort((a, b) => a - b),
    'every flag has a display name',
  );
});

t.test("no AFFINITY_ORIGIN_ is 0 (a zeroed key is no entry's)", async (t) => {
  const origins = exported('AFFINITY_ORIGIN_');
  t.ok(origins.length >= 4);
  for (const [n, v] of origins) t.ok(v > 0, n);
});

t.test('the datapath counters: every hook and reason of the header has one label', async (t) => {
  t.ok(k.DP_R_MAX <= k.DP_REASON_STRIDE, "every reason fits in a hook's stride");
  t.ok(k.DP_HOOK_MAX * k.DP_REASON_STRIDE <= k.SVCMAP_METRICS_MAX, 'every (hook, reason) fits in the map');
  const reasonIds = exported('DP_R_')
    .filter(([n]) => n !== 'DP_R_MAX')
    .map(([, v]) => v)
    .sort((a, b) => a - b);
  t.same(
    reasonIds,
    Array.from({ length: k.DP_R_MAX }, (_, i) => i),
    'reasons are 0..DP_R_MAX-1',
  );
  t.same(
    k.DP_REASONS.map((r) => r.id).sort((a, b) => a - b),
    reasonIds,
    'every reason has exactly one label',
  );
  t.equal(new Set(k.DP_REASONS.map((r) => r.name)).size, k.DP_REASONS.length, 'reason labels are distinct');
  const hookIds = exported('DP_HOOK_')
    .filter(([n]) => n !== 'DP_HOOK_MAX')
    .map(([, v]) => v)
    .sort((a, b) => a - b);
  t.same(
    hookIds,
    Array.from({ length: k.DP_HOOK_MAX }, (_, i) => i),
    'hooks are 0..DP_HOOK_MAX-1',
  );
  t.same(
    k.DP_HOOKS.map((h) => h.id).sort((a, b) => a - b),
    hookIds,
    'every hook has exactly one label',
  );
  const hookNames = new Set(k.DP_HOOKS.map((h) => h.name));
  for (const r of k.DP_REASONS) {
    t.ok(r.hooks.length > 0 && r.hooks.every((h) => hookNames.has(h)), `${r.name}: counted at known hooks`);
  }
});
