// The tc object compiles with the project's flags, the verifier on this
// kernel accepts both programs at the default map sizes, and its maps have
// the types, flags and layouts the header declares.
import t from 'tap';
import { BtfFile } from '../../src/bpf/btf.ts';
import { compileBpf } from '../../src/bpf/compile.ts';
import { progInfo } from '../../src/bpf/link.ts';
import { BpfObject } from '../../src/bpf/object.ts';
import { structDrift } from '../../src/maps/btf-check.ts';
import { affinityKey, affinityValue } from '../../src/maps/codecs.ts';
import { configMap, ctKey, ctMap, ctValue, srcRangeKey, srcRangeMap, tcConfig } from './fixtures/tc-codecs.ts';

const BPF_PROG_TYPE_SCHED_CLS = 3;
const MAP_HASH = 1;
const MAP_ARRAY = 2;
const MAP_LRU_HASH = 9;
const MAP_LPM_TRIE = 11;
const BPF_F_NO_PREALLOC = 1;

const tc = compileBpf({ program: 'tc' });

t.test('the verifier accepts both tc programs at the default map sizes', async (t) => {
  const o = BpfObject.open(tc.path);
  t.teardown(() => o.close());
  t.same(
    o.programs().map((p) => [p.name, p.section]),
    [
      ['svcmap_tc_in', 'tc'],
      ['svcmap_tc_out', 'tc'],
      ['svcmap_conns_adjust', 'syscall'],
    ],
    'the two tc programs, and the program the agent runs to change connection counts',
  );
  o.load();
  for (const name of ['svcmap_tc_in', 'svcmap_tc_out']) {
    t.ok(name.length <= 15, `${name} fits the kernel's name limit`);
    const info = progInfo(o.programFd(name));
    t.equal(info.type, BPF_PROG_TYPE_SCHED_CLS, `${name} is sched_cls`);
    t.equal(info.name, name);
  }

  const maps = new Map(o.maps().map((m) => [m.name, o.map(m.name).info]));
  const ct = maps.get('svcmap_ct')!;
  t.match(ct, { type: MAP_LRU_HASH, keySize: 16, valueSize: 32, maxEntries: 262144 }, 'conntrack: LRU hash');
  const src = maps.get('svcmap_srcrng')!;
  t.match(src, { type: MAP_LPM_TRIE, keySize: 12, valueSize: 1, maxEntries: 16384 }, 'source ranges: LPM trie');
  t.equal(src.flags & BPF_F_NO_PREALLOC, BPF_F_NO_PREALLOC, 'the LPM trie is created without preallocation');
  t.match(maps.get('svcmap_cfg')!, { type: MAP_ARRAY, keySize: 4, valueSize: 12, maxEntries: 1 }, 'config: an array of one');
  t.match(maps.get('svcmap_svc')!, { type: MAP_HASH, keySize: 12, valueSize: 20 }, 'the services map is the shared one');
  t.match(
    maps.get('svcmap_affin')!,
    { type: MAP_LRU_HASH, keySize: 24, valueSize: 16, maxEntries: 65536 },
    'session affinity: LRU hash, shared',
  );
});

t.test('the tc codecs match the BTF of the compiled object', async (t) => {
  const btf = new BtfFile(tc.path);
  t.teardown(() => btf.close());
  for (const codec of [ctKey, ctValue, srcRangeKey, tcConfig]) {
    t.same(
      structDrift(codec.layout, (n) => btf.struct(n)),
      [],
      `struct ${codec.layout.cName}`,
    );
  }
});

t.test('the socket-hook object does not carry the tc-only maps', async (t) => {
  const o = BpfObject.open(compileBpf({ program: 'sock' }).path);
  t.teardown(() => o.close());
  const names = o.maps().map((m) => m.name);
  for (const m of [ctMap, srcRangeMap, configMap]) t.notOk(names.includes(m.name), `sock.o has no ${m.name}`);
  t.ok(names.includes('svcmap_affin'), 'but shares the session affinity map');
  const btf = new BtfFile(tc.path);
  const sockBtf = new BtfFile(compileBpf({ program: 'sock' }).path);
  t.teardown(() => {
    btf.close();
    sockBtf.close();
  });
  for (const codec of [affinityKey, affinityValue]) {
    t.same(
      structDrift(codec.layout, (n) => btf.struct(n)),
      [],
      `tc.o: struct ${codec.layout.cName}`,
    );
    t.same(
      structDrift(codec.layout, (n) => sockBtf.struct(n)),
      [],
      `sock.o: struct ${codec.layout.cName}`,
    );
  }
});
