// The libbpf binding against the real kernel: element and batch operations,
// buffer length checks, errors with errno names, and verifier logs.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { BpfError } from '../../src/bpf/errors.ts';
import { BpfMap } from '../../src/bpf/map.ts';
import { BpfObject } from '../../src/bpf/object.ts';

const HASH = 1;

t.test('element operations and length checks', async (t) => {
  const m = BpfMap.create(HASH, 'tst_elem', 4, 8, 16);
  t.teardown(() => m.close());
  const k = Buffer.from([1, 0, 0, 0]);
  t.equal(m.lookup(k), undefined, 'missing key');
  m.update(k, Buffer.from('abcdefgh'));
  t.equal(m.lookup(k)?.toString(), 'abcdefgh');
  t.throws(() => m.update(Buffer.alloc(3), Buffer.alloc(8)), { message: /key is 3 bytes, the map's key_size is 4/ });
  t.throws(() => m.update(k, Buffer.alloc(9)), { message: /value is 9 bytes, the map's value_size is 8/ });
  t.throws(() => m.lookup(Buffer.alloc(5)), { message: /key is 5 bytes/ });
  t.equal(m.delete(k), true);
  t.equal(m.delete(k), false, 'deleting a missing key says so');
});

t.test('a full map fails with E2BIG, named', async (t) => {
  const m = BpfMap.create(HASH, 'tst_full', 4, 4, 2);
  t.teardown(() => m.close());
  for (let i = 0; i < 2; i++) m.update(Buffer.from([i, 0, 0, 0]), Buffer.alloc(4));
  const err = t.throws(() => m.update(Buffer.from([9, 0, 0, 0]), Buffer.alloc(4))) as unknown as BpfError;
  t.ok(err instanceof BpfError);
  t.equal(err.code, 'E2BIG');
  t.match(err.message, /update tst_full: E2BIG/);
});

t.test('batch update, lookup and delete of 20,000 entries', async (t) => {
  const n = 20_000;
  const m = BpfMap.create(HASH, 'tst_batch', 4, 8, n);
  t.teardown(() => m.close());
  const keys = Buffer.alloc(n * 4);
  const values = Buffer.alloc(n * 8);
  for (let i = 0; i < n; i++) {
    keys.writeUInt32LE(i, i * 4);
    values.writeBigUInt64LE(BigInt(i) * 3n, i * 8);
  }
  m.updateBatch(keys, values, n);
  const all = m.entries();
  t.equal(all.length, n, 'lookup batch reads every entry');
  t.ok(
    all.every(([k, v]) => v.readBigUInt64LE() === BigInt(k.readUInt32LE()) * 3n),
    'values match keys',
  );
  t.same(m.deleteBatch(keys.subarray(0, (n / 2) * 4), n / 2), [], 'every key was there');
  t.equal(m.count(), n / 2);
  // Keys 0, 1 and 3 are gone already: the rest go, and those three are reported, by index.
  const some = Buffer.alloc(6 * 4);
  for (const [i, k] of [0, 1, n / 2, 3, n / 2 + 1, n / 2 + 2].entries()) some.writeUInt32LE(k, i * 4);
  t.same(m.deleteBatch(some, 6), [0, 1, 3], 'the keys already gone, by index');
  t.equal(m.count(), n / 2 - 3);
  t.throws(() => m.updateBatch(keys, values, n + 1), { message: /key bytes for/ }, 'batch lengths are checked');
});

t.test('a batch past capacity reports how many elements it wrote', async (t) => {
  const m = BpfMap.create(HASH, 'tst_bfull', 4, 4, 10);
  t.teardown(() => m.close());
  const keys = Buffer.alloc(15 * 4);
  for (let i = 0; i < 15; i++) keys.writeUInt32LE(i, i * 4);
  t.throws(() => m.updateBatch(keys, Buffer.alloc(15 * 4), 15), { processed: 10, requested: 15, code: 'E2BIG' });
});

t.test('a program the verifier rejects fails with the verifier log', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'svcmap-unsafe-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const obj = join(dir, 'unsafe.o');
  const src = fileURLToPath(new URL('../fixtures/bpf/unsafe.c', import.meta.url));
  execFileSync('clang', ['-O2', '-g', '-target', 'bpf', '-I', '/usr/include/x86_64-linux-gnu', '-c', src, '-o', obj]);
  const o = BpfObject.open(obj);
  t.teardown(() => o.close());
  const err = t.throws(() => o.load()) as unknown as BpfError;
  t.ok(err instanceof BpfError, 'a BpfError');
  t.match(err.message, /load BPF object .*unsafe\.o/);
  t.match(err.log, /invalid mem access|R0 invalid mem access|map_value_or_null/, 'the verifier says why');
});

t.test('opening a file that is not a BPF object fails clearly', async (t) => {
  t.throws(() => BpfObject.open('/nonexistent/x.o'), { message: /does not exist/ });
  t.throws(() => BpfObject.open('/etc/hostname'), { message: /open BPF object \/etc\/hostname/ });
});
