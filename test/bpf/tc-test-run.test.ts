// The BPF_PROG_TEST_RUN wrapper (src/bpf/test-run.ts): lengths are checked
// before the FFI sees a buffer, kernel refusals come back as BpfErrors, and
// the context goes in and out. Run against svcmap_tc_out on this kernel.
import t from 'tap';
import { BtfFile } from '../../src/bpf/btf.ts';
import { compileBpf } from '../../src/bpf/compile.ts';
import { BpfError } from '../../src/bpf/errors.ts';
import { progTestRun } from '../../src/bpf/test-run.ts';
import { buildArp, buildIpv4 } from './fixtures/packets.ts';
import { TC_ACT_OK, TcHarness } from './fixtures/tc-harness.ts';

const h = TcHarness.open({ ctMax: 64 });
t.teardown(() => h.close());
const arp = buildArp('203.0.113.7', '198.51.100.1');

t.test('a run returns the verdict, the packet and the time', async (t) => {
  const res = progTestRun(h.outFd, arp);
  t.equal(res.retval, TC_ACT_OK);
  t.ok(res.packetOut.equals(arp));
  t.type(res.durationNs, 'number');
  t.equal(res.ctxOut, undefined, 'no context in, none out');
  // repeat reaches the kernel: the program ran 500 times (its counter says
  // so), and the time is their mean. How long a run takes is make bench's.
  let many = res;
  const moved = h.countsOf(() => {
    many = progTestRun(h.outFd, arp, { repeat: 500 });
  });
  t.same(moved, { 'tc_egress/other_protocol': 500 }, 'repeat 500: the program ran 500 times');
  t.equal(many.retval, TC_ACT_OK);
  t.ok(Number.isInteger(many.durationNs) && many.durationNs >= 0, `the mean of the 500 runs, in whole ns (${many.durationNs})`);
});

t.test('lengths are checked before the kernel sees them', async (t) => {
  t.throws(() => progTestRun(h.outFd, Buffer.alloc(13)), { name: 'RangeError', message: /13 bytes; the kernel needs at least 14/ });
  t.throws(() => progTestRun(h.outFd, arp, { dataOutSize: 0 }), { name: 'RangeError', message: /dataOutSize/ });
  t.throws(() => progTestRun(h.outFd, arp, { repeat: 0 }), { name: 'RangeError', message: /repeat/ });
  t.throws(() => progTestRun(h.outFd, arp, { repeat: 1.5 }), { name: 'RangeError' });
  t.throws(() => progTestRun(h.outFd, arp, { ctx: Buffer.alloc(0) }), { name: 'RangeError', message: /ctx is empty/ });
});

t.test('an output buffer too small for the packet is ENOSPC, not an overflow', async (t) => {
  const err = t.throws(() => progTestRun(h.outFd, arp, { dataOutSize: 20 })) as unknown as BpfError;
  t.ok(err instanceof BpfError);
  t.equal(err.code, 'ENOSPC');
  t.match(err.message, /larger than dataOutSize 20/);
});

t.test('this kernel refuses an IPv4 or IPv6 frame shorter than its IP header', async (t) => {
  for (const [ethertype, ipHeader] of [
    [0x0800, 20],
    [0x86dd, 40],
  ] as const) {
    const short = Buffer.alloc(14 + ipHeader - 1);
    short.writeUInt16BE(ethertype, 12);
    t.throws(
      () => progTestRun(h.outFd, short),
      { code: 'EINVAL' },
      `ethertype 0x${ethertype.toString(16)} with ${ipHeader - 1} bytes after it`,
    );
    const full = Buffer.alloc(14 + ipHeader);
    full.writeUInt16BE(ethertype, 12);
    t.equal(progTestRun(h.outFd, full).retval, TC_ACT_OK, `and takes it with ${ipHeader}`);
  }
});

t.test('a __sk_buff context goes in and comes back', async (t) => {
  const btf = new BtfFile(compileBpf({ program: 'tc' }).path);
  t.teardown(() => btf.close());
  const skb = btf.struct('__sk_buff');
  t.ok(skb, 'the object has struct __sk_buff in its BTF');
  const at = (name: string) => skb!.members.find((m) => m.name === name)!.offset;
  const ctx = Buffer.alloc(skb!.size);
  ctx.writeUInt32LE(0x5a5a, at('mark'));
  ctx.writeUInt32LE(1, at('ifindex')); // lo: the device test runs use anyway
  const frame = buildIpv4({ saddr: '203.0.113.7', daddr: '198.51.100.1', proto: 'tcp', sport: 1, dport: 2 });
  const res = progTestRun(h.outFd, frame, { ctx });
  t.equal(res.retval, TC_ACT_OK);
  t.equal(res.ctxOut?.length, skb!.size);
  t.equal(res.ctxOut?.readUInt32LE(at('mark')), 0x5a5a, 'mark survives the run');

  const nodev = Buffer.from(ctx);
  nodev.writeUInt32LE(0x7ffffff0, at('ifindex'));
  t.throws(() => progTestRun(h.outFd, frame, { ctx: nodev }), { code: 'ENODEV' }, 'an ifindex with no device is refused');
});
