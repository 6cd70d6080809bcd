// Every pinned map's layout carries a version (layoutVersion in
// src/maps/registry.ts) and every version's layout is recorded
// (src/maps/generated/layouts.gen.ts, make layouts): a layout that changes
// without a new version, or a step between versions that conversion by field
// name cannot take without an override, fails here with what to do.
import { readFileSync } from 'node:fs';
import t from 'tap';
import { GENERATED, currentLayouts, generateLayouts, record } from '../../mk/gen-layouts.ts';
import { LAYOUTS, TEST_LAYOUTS } from '../../src/maps/generated/layouts.gen.ts';
import { type MapLayout, layoutProblems } from '../../src/maps/layout-versions.ts';
import { hasOverride } from '../../src/maps/migration/overrides.ts';
import { ALL_MAPS, backendsMap } from '../../src/maps/registry.ts';

const current = currentLayouts();

t.test('every map has the layout recorded for its layoutVersion', async (t) => {
  const problems = layoutProblems(ALL_MAPS, current, LAYOUTS, hasOverride);
  for (const p of problems) t.fail(`${p.map}: ${p.problem}`);
  t.equal(problems.length, 0);
});

t.test('the committed record is what make layouts writes', async (t) => {
  const { text, errors } = await generateLayouts();
  t.same(errors, []);
  t.equal(readFileSync(GENERATED, 'utf8'), text, 'src/maps/generated/layouts.gen.ts is up to date: run make layouts and commit it');
});

t.test('the test layout differs in the backend value only, by reserved_test', async (t) => {
  t.same(Object.keys(TEST_LAYOUTS), [backendsMap.name]);
  const test = TEST_LAYOUTS[backendsMap.name]!;
  const normal = LAYOUTS[backendsMap.name]![backendsMap.layoutVersion!]!;
  t.same(
    test.value.fields.filter((f) => !normal.value.fields.some((g) => g[0] === f[0])),
    [['reserved_test', 12, 4]],
  );
  t.equal(test.valueSize, normal.valueSize + 4);
});

/** The backends map's current layout with one more value field. */
const grown = (): Record<string, MapLayout> => {
  const be = current[backendsMap.name]!;
  return {
    ...current,
    [backendsMap.name]: { ...be, valueSize: 16, value: { ...be.value, size: 16, fields: [...be.value.fields, ['weight', 12, 4]] } },
  };
};

t.test('a layout changed without a new version fails, saying to raise the version and run make layouts', async (t) => {
  const problems = layoutProblems(ALL_MAPS, grown(), LAYOUTS, hasOverride);
  t.same(
    problems.map((p) => p.map),
    [backendsMap.name],
  );
  t.match(problems[0]!.problem, /differs from recorded version 1 \(valueSize 12 -> 16; value: new field weight \(offset 12, 4 bytes\)\)/);
  t.match(problems[0]!.problem, /raise layoutVersion of the map in src\/maps\/registry.ts by one and run `make layouts`/);
  t.match(record(LAYOUTS, grown()).errors.join('\n'), /svcmap_be: the layout differs from recorded version 1 .*raise its layoutVersion/);
});

t.test('with the version raised, an unrecorded version asks for make layouts, a recorded one passes', async (t) => {
  const specs = ALL_MAPS.map((s) => (s === backendsMap ? { ...s, layoutVersion: 2 } : s));
  const now = grown();
  t.match(layoutProblems(specs, now, LAYOUTS, hasOverride)[0]?.problem, /layout version 2 is not recorded: run `make layouts`/);
  const recorded = { ...LAYOUTS, [backendsMap.name]: { ...LAYOUTS[backendsMap.name], 2: now[backendsMap.name]! } };
  t.same(layoutProblems(specs, now, recorded, hasOverride), []);
});

t.test('a step that changes a field size under the same name needs an override', async (t) => {
  const be = current[backendsMap.name]!;
  const wider: MapLayout = {
    ...be,
    valueSize: 14,
    value: { ...be.value, size: 14, fields: be.value.fields.map((f) => (f[0] === 'zone' ? (['zone', 10, 4] as const) : f)) },
  };
  const specs = ALL_MAPS.map((s) => (s === backendsMap ? { ...s, layoutVersion: 2 } : s));
  const recorded = { ...LAYOUTS, [backendsMap.name]: { ...LAYOUTS[backendsMap.name], 2: wider } };
  const now = { ...current, [backendsMap.name]: wider };
  t.match(
    layoutProblems(specs, now, recorded, hasOverride)
      .map((p) => p.problem)
      .join('\n'),
    /version 1 -> 2 changes the size of value.zone: 2 -> 4 bytes, .*add a conversion for it in src\/maps\/migration\/overrides.ts/,
  );
  t.same(
    layoutProblems(specs, now, recorded, () => true),
    [],
    'with an override the step is fine',
  );
});
