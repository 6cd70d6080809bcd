// The codecs agree with the BTF clang emits for bpf/include/svcmap_maps.h,
// and the check names the struct and field when they do not.
import t from 'tap';
import { BtfFile } from '../../src/bpf/btf.ts';
import { compileBpf } from '../../src/bpf/compile.ts';
import { codecDrift, structDrift } from '../../src/maps/btf-check.ts';
import { svcKey, svcValue } from '../../src/maps/codecs.ts';
import { ALL_MAPS } from '../../src/maps/registry.ts';
import type { StructLayout } from '../../src/maps/layout.ts';

const btf = new BtfFile(compileBpf({ program: 'sock' }).path);
const tcBtf = new BtfFile(compileBpf({ program: 'tc' }).path);
t.teardown(() => {
  btf.close();
  tcBtf.close();
});
// Each struct is checked against the object that uses it (the tc structs live in tc.o only).
const lookup = (name: string) => btf.struct(name) ?? tcBtf.struct(name);

t.test('every codec matches the compiled object', async (t) => {
  t.same(codecDrift(ALL_MAPS, lookup), []);
});

t.test('BTF sees the struct as the header defines it', async (t) => {
  const s = btf.struct('svc_key')!;
  t.equal(s.size, 12);
  t.same(
    s.members.map((m) => [m.name, m.offset, m.size]),
    [
      ['addr', 0, 4],
      ['port', 4, 2],
      ['slot', 6, 2],
      ['proto', 8, 1],
      ['scope', 9, 1],
      ['pad', 10, 2],
    ],
  );
});

t.test('BTF sees the IPv6 structs as the header defines them', async (t) => {
  const members = (name: string) => btf.struct(name)!.members.map((m) => [m.name, m.offset, m.size]);
  t.equal(btf.struct('svc6_key')!.size, 24);
  t.same(members('svc6_key'), [
    ['addr', 0, 16],
    ['port', 16, 2],
    ['slot', 18, 2],
    ['proto', 20, 1],
    ['scope', 21, 1],
    ['pad', 22, 2],
  ]);
  t.equal(btf.struct('backend6_value')!.size, 24);
  t.equal(btf.struct('rev_nat6_value')!.size, 20);
});

const withField = (layout: StructLayout, name: string, change: Partial<{ offset: number; size: number }>): StructLayout => ({
  ...layout,
  fields: layout.fields.map((f) => (f.name === name ? { ...f, ...change } : f)),
});

t.test('a wrong offset is caught, naming the struct and field', async (t) => {
  const drift = structDrift(withField(svcKey.layout, 'port', { offset: 6 }), lookup);
  t.match(drift.join('\n'), /struct svc_key: field port is at offset 4 in BTF, the codec says 6/);
});

t.test('a wrong size, a missing field and a wrong struct size are caught', async (t) => {
  t.match(
    structDrift(withField(svcValue.layout, 'count', { size: 4 }), lookup).join('\n'),
    /struct svc_value: field count is 2 bytes in BTF, the codec says 4/,
  );
  const missing = { ...svcValue.layout, fields: svcValue.layout.fields.filter((f) => f.name !== 'flags') };
  t.match(structDrift(missing, lookup).join('\n'), /struct svc_value: field flags \(offset 10\) is in BTF but not in the codec/);
  t.match(structDrift({ ...svcValue.layout, size: 24 }, lookup).join('\n'), /struct svc_value: size is 20 bytes in BTF, the codec says 24/);
  t.match(structDrift({ ...svcValue.layout, cName: 'no_such_struct' }, lookup).join('\n'), /struct no_such_struct: not found/);
});
