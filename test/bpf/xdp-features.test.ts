// xdp-features.ts: the netdev generic netlink family's replies parsed as the
// kernel encodes them, and on this kernel: a veth's NDO_XMIT bit follows its
// peer's GRO, and each change is announced on the family's mgmt group
// (watchGenetlink). Run in the private namespace of the tc unit tests: the
// devices made here touch nothing of this machine and go with the process.
import { execFileSync } from 'node:child_process';
import t from 'tap';
import { watchGenetlink } from '../../src/bpf/netlink.ts';
import { nlAttr } from '../../src/bpf/nlmsg.ts';
import { ifIndex } from '../../src/bpf/tc.ts';
import {
  NETDEV_XDP_ACT_NDO_XMIT,
  netdevFamily,
  parseDevMessage,
  parseFamilyMessage,
  readXdpFeatures,
  takesXdpFrames,
} from '../../src/bpf/xdp-features.ts';
import { enterPrivateNet, privateNetIp } from './fixtures/private-net.ts';

const u16 = (v: number) => Buffer.from([v & 0xff, v >> 8]);
const u32 = (v: number) => {
  const b = Buffer.alloc(4);
  b.writeUInt32LE(v);
  return b;
};
const u64 = (v: bigint) => {
  const b = Buffer.alloc(8);
  b.writeBigUInt64LE(v);
  return b;
};
const str = (s: string) => Buffer.from(`${s}\0`);
const NESTED = 0x8000;
const genl = (cmd: number) => Buffer.from([cmd, 1, 0, 0]);

t.test('CTRL_CMD_GETFAMILY reply: the family id and the mgmt group among the groups', async (t) => {
  const group = (n: number, name: string, id: number) => nlAttr(n | NESTED, Buffer.concat([nlAttr(1, str(name)), nlAttr(2, u32(id))]));
  const reply = Buffer.concat([
    genl(1), // CTRL_CMD_NEWFAMILY
    nlAttr(1, u16(0x1d)), // CTRL_ATTR_FAMILY_ID
    nlAttr(2, str('netdev')),
    nlAttr(7 | NESTED, Buffer.concat([group(1, 'mgmt', 0x11), group(2, 'page-pool', 0x12)])), // CTRL_ATTR_MCAST_GROUPS
  ]);
  t.same(parseFamilyMessage(reply), { id: 0x1d, mgmtGroup: 0x11 });
  const noGroups = Buffer.concat([genl(1), nlAttr(1, u16(0x1d))]);
  t.same(parseFamilyMessage(noGroups), { id: 0x1d, mgmtGroup: -1 }, 'a family without the group: -1');
  t.throws(() => parseFamilyMessage(genl(1)), /no CTRL_ATTR_FAMILY_ID/);
});

t.test('NETDEV_CMD_DEV_GET reply: ifindex and the 64-bit XDP features after the pad attribute', async (t) => {
  const reply = Buffer.concat([genl(1), nlAttr(1, u32(7)), nlAttr(2, Buffer.alloc(0)), nlAttr(3, u64(0x7fn)), nlAttr(4, u32(1))]);
  const dev = parseDevMessage(reply);
  t.same(dev, { ifindex: 7, xdpFeatures: 0x7fn });
  t.ok(takesXdpFrames(dev.xdpFeatures), 'NDO_XMIT set');
  t.notOk(takesXdpFrames(0x3n), 'BASIC | REDIRECT without NDO_XMIT: takes no redirected frames');
  t.same(parseDevMessage(Buffer.concat([genl(1), nlAttr(1, u32(3))])), { ifindex: 3, xdpFeatures: 0n }, 'no features attribute: none');
  t.throws(() => parseDevMessage(genl(1)), /without NETDEV_A_DEV_IFINDEX/);
});

t.test('on this kernel: a veth takes XDP frames while its peer has GRO on, and each change is announced', async (t) => {
  enterPrivateNet();
  privateNetIp('link', 'add', 'xf0', 'type', 'veth', 'peer', 'name', 'xf0p');
  for (const d of ['xf0', 'xf0p']) privateNetIp('link', 'set', d, 'up');
  const family = netdevFamily();
  if (!family) throw new Error('this kernel has no netdev generic netlink family (Linux 6.3+); svcmap CI runs on one that has');
  t.ok(family.mgmtGroup > 0, `the mgmt group: ${family.mgmtGroup}`);
  const xf0 = ifIndex('xf0');
  const features = () => readXdpFeatures(family).get(xf0);
  const ethtool = (gro: 'on' | 'off') => execFileSync('ethtool', ['-K', 'xf0p', 'gro', gro], { stdio: 'ignore' });
  ethtool('off');
  t.ok(features() !== undefined, 'xf0 is listed');
  t.equal(features()! & NETDEV_XDP_ACT_NDO_XMIT, 0n, "the peer's GRO off: xf0 takes no redirected frames");
  t.ok(features()! & 1n, 'but runs XDP (BASIC)');

  // A notification per change, on the group; a test that waits in vain fails by tap's timeout.
  const keepAlive = setInterval(() => {}, 1000);
  t.teardown(() => clearInterval(keepAlive));
  let notified: () => void = () => {};
  const watch = watchGenetlink(family.mgmtGroup, 'netdev mgmt', () => notified());
  t.teardown(() => watch.close());
  const next = () => new Promise<void>((r) => (notified = r));

  let changed = next();
  ethtool('on');
  await changed;
  t.ok(takesXdpFrames(features()!), "the peer's GRO on: announced, and xf0 takes them");
  changed = next();
  ethtool('off');
  await changed;
  t.notOk(takesXdpFrames(features()!), 'off again: announced, and cleared');
});
