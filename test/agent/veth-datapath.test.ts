// The veth datapath's choices without a kernel: which links are pods'
// interfaces (from rtnetlink's RTM_NEWLINK messages as the kernel encodes
// them), and which conntrack entries a removed backend's UDP flows hold.
import t from 'tap';
import { parseLinkMessage } from '../../src/bpf/links.ts';
import { podVeths } from '../../src/agent/datapath/veth-datapath.ts';
import { removedFlowKeys } from '../../src/agent/loops/ct-clear.ts';
import type { CtKey, CtValue } from '../../src/maps/codecs.ts';
import { CT_DIR_FWD, CT_DIR_REPLY_OUT, IPPROTO_TCP, IPPROTO_UDP } from '../../src/maps/constants.ts';

/** An rtattr: length, type, payload, padded to 4 bytes. */
function attr(type: number, payload: Buffer): Buffer {
  const len = 4 + payload.length;
  const b = Buffer.alloc((len + 3) & ~3);
  b.writeUInt16LE(len, 0);
  b.writeUInt16LE(type, 2);
  payload.copy(b, 4);
  return b;
}
const str = (s: string) => Buffer.from(`${s}\0`);

/** An RTM_NEWLINK payload: struct ifinfomsg, then IFLA_IFNAME, IFLA_LINKINFO{IFLA_INFO_KIND} and maybe IFLA_LINK_NETNSID. */
function linkMessage(ifindex: number, name: string, kind: string | undefined, netnsid: number | undefined): Buffer {
  const ifi = Buffer.alloc(16);
  ifi.writeInt32LE(ifindex, 4);
  const parts = [ifi, attr(3, str(name))];
  if (kind !== undefined) parts.push(attr(18 | 0x8000, attr(1, str(kind))));
  if (netnsid !== undefined) {
    const id = Buffer.alloc(4);
    id.writeInt32LE(netnsid);
    parts.push(attr(37, id));
  }
  return Buffer.concat(parts);
}

t.test('RTM_NEWLINK: name, index, kind and a peer in another namespace', async (t) => {
  t.same(parseLinkMessage(linkMessage(7, 'vethab12', 'veth', 0)), { name: 'vethab12', ifindex: 7, kind: 'veth', peerInOtherNetns: true });
  t.same(parseLinkMessage(linkMessage(1, 'lo', undefined, undefined)), { name: 'lo', ifindex: 1, kind: '', peerInOtherNetns: false });
  t.same(parseLinkMessage(linkMessage(3, 'x1', 'veth', undefined)).peerInOtherNetns, false);
});

t.test("pods' veths: veths whose peer is elsewhere, not the node's external devices", async (t) => {
  const links = [
    { name: 'lo', ifindex: 1, kind: '', peerInOtherNetns: false },
    { name: 'eth0', ifindex: 2, kind: 'veth', peerInOtherNetns: true }, // a kind-like node's uplink
    { name: 'cni0', ifindex: 3, kind: 'bridge', peerInOtherNetns: false },
    { name: 'vethb', ifindex: 5, kind: 'veth', peerInOtherNetns: true },
    { name: 'vetha', ifindex: 4, kind: 'veth', peerInOtherNetns: true },
    { name: 'pair1', ifindex: 6, kind: 'veth', peerInOtherNetns: false }, // both ends here
    { name: 'vxlan0', ifindex: 7, kind: 'vxlan', peerInOtherNetns: true },
  ];
  t.same(
    podVeths(links, new Set(['eth0'])).map((l) => l.name),
    ['vetha', 'vethb'],
  );
});

t.test("a removed backend's UDP flows: forward entries to it and reply entries from it, of that frontend", async (t) => {
  const v = (o: Partial<CtValue>): CtValue => ({
    new_saddr: '0.0.0.0',
    new_daddr: '0.0.0.0',
    new_sport: 0,
    new_dport: 0,
    backend_id: 1,
    rev_nat_id: 5,
    flags: 0,
    last_seen: 0n,
    ...o,
  });
  const k = (o: Partial<CtKey>): CtKey => ({
    saddr: '10.0.0.9',
    daddr: '10.96.0.1',
    sport: 4000,
    dport: 53,
    proto: IPPROTO_UDP,
    dir: CT_DIR_FWD,
    ...o,
  });
  const fwdGone = k({});
  const replyGone = k({ saddr: '10.0.0.1', sport: 5353, daddr: '10.0.0.9', dport: 4000, dir: CT_DIR_REPLY_OUT });
  const entries: Array<[CtKey, CtValue]> = [
    [fwdGone, v({ new_daddr: '10.0.0.1', new_dport: 5353 })],
    [replyGone, v({ new_saddr: '10.96.0.1', new_sport: 53 })],
    [k({ sport: 4001 }), v({ new_daddr: '10.0.0.2', new_dport: 5353 })], // another backend
    [k({ sport: 4002, proto: IPPROTO_TCP }), v({ new_daddr: '10.0.0.1', new_dport: 5353 })], // TCP: left to finish
    [k({ sport: 4003 }), v({ new_daddr: '10.0.0.1', new_dport: 5353, rev_nat_id: 6 })], // the backend stays in another frontend
  ];
  t.same(removedFlowKeys(entries, [{ addr: '10.0.0.1', port: 5353, proto: IPPROTO_UDP, revNatId: 5 }]), [fwdGone, replyGone]);
  t.same(removedFlowKeys(entries, [{ addr: '10.0.0.1', port: 5353, proto: IPPROTO_TCP, revNatId: 5 }]), [], 'a TCP backend: nothing');
});
