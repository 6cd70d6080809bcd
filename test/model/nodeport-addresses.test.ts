// --nodeport-addresses and localhost NodePorts, by kube-proxy's rules
// (pkg/proxy/util/nodeport_addresses.go, v1.34): the flag's parsing and its
// errors, which of the node's addresses serve NodePorts, when 127.0.0.1 and
// [::1] do, and the incremental model rebuilding a NodePort Service's
// frontends when the rule or the node's addresses change.
import t from 'tap';
import { IncrementalModel } from '../../src/model/incremental.ts';
import {
  EVERY_NODE_ADDRESS,
  cidrContains,
  localhostNodePorts,
  nodePortIPs,
  parseNodePortAddresses,
} from '../../src/model/nodeport-addresses.ts';
import type { Service } from '../../src/model/schemas.ts';
import type { NodeInfo } from '../../src/model/types.ts';
import { validateObject } from '../../src/model/validate.ts';

const NODE: NodeInfo = { name: 'n1', addresses: ['192.168.1.10', '203.0.113.7'], addresses6: ['fd00:1::10'] };
/** The node's interfaces: the InternalIPs, a pod bridge, a second NIC, link-local and loopback are already left out by host-net. */
const LOCAL = ['192.168.1.10', '10.244.0.1', '172.16.5.1', 'fd00:1::10', 'fd00:10:244::1'];

t.test('parse: CIDRs of both families (made canonical), primary alone; errors name the value', async (t) => {
  t.same(parseNodePortAddresses('10.0.0.0/8, FD00::/8'), { kind: 'cidrs', cidrs: ['10.0.0.0/8', 'fd00::/8'] });
  t.same(parseNodePortAddresses('192.168.1.10/32'), { kind: 'cidrs', cidrs: ['192.168.1.10/32'] });
  t.same(parseNodePortAddresses('primary'), { kind: 'primary' });
  t.throws(() => parseNodePortAddresses('10.0.0.0'), { message: /"10\.0\.0\.0" is not a CIDR/ });
  t.throws(() => parseNodePortAddresses('10.0.0.0/33'), { message: /"10\.0\.0\.0\/33" is not a CIDR/ });
  t.throws(() => parseNodePortAddresses('10.0.0.0/8,eth0'), { message: /"eth0" is not a CIDR/ });
  t.throws(() => parseNodePortAddresses('primary,10.0.0.0/8'), { message: /"primary" stands alone/ });
  t.throws(() => parseNodePortAddresses('10.0.0.0/8,'), { message: /empty item/ });
});

t.test('cidrContains: host bits in the CIDR ignored, the other family never', async (t) => {
  t.ok(cidrContains('10.1.2.3/8', '10.200.0.1'));
  t.notOk(cidrContains('10.0.0.0/8', '11.0.0.1'));
  t.ok(cidrContains('fd00::/8', 'fd00:1::10'));
  t.notOk(cidrContains('fd00::/8', '10.0.0.1'));
  t.ok(cidrContains('0.0.0.0/0', '192.0.2.1'));
});

t.test('not given: every address of the node, the Node object first, per family', async (t) => {
  t.same(nodePortIPs(EVERY_NODE_ADDRESS, 4, NODE, LOCAL), ['192.168.1.10', '203.0.113.7', '10.244.0.1', '172.16.5.1']);
  t.same(nodePortIPs(EVERY_NODE_ADDRESS, 6, NODE, LOCAL), ['fd00:1::10', 'fd00:10:244::1']);
  t.same(
    nodePortIPs(EVERY_NODE_ADDRESS, 4, NODE, []),
    NODE.addresses,
    "without the interfaces' (the agent not in the node's namespace): the Node's",
  );
  t.same(nodePortIPs(EVERY_NODE_ADDRESS, 4, NODE, ['127.0.0.1', '::1']), NODE.addresses, 'loopback never');
});

t.test('CIDRs: the addresses inside them; a family without a CIDR of its own keeps every address', async (t) => {
  const spec = parseNodePortAddresses('192.168.1.0/24,172.16.0.0/12');
  t.same(nodePortIPs(spec, 4, NODE, LOCAL), ['192.168.1.10', '172.16.5.1']);
  t.same(nodePortIPs(spec, 6, NODE, LOCAL), ['fd00:1::10', 'fd00:10:244::1'], 'no IPv6 CIDR: every IPv6 address (kube-proxy adds ::/0)');
  const v6 = parseNodePortAddresses('fd00:10:244::/64');
  t.same(nodePortIPs(v6, 6, NODE, LOCAL), ['fd00:10:244::1']);
  t.same(nodePortIPs(parseNodePortAddresses('198.51.100.0/24'), 4, NODE, LOCAL), [], 'a CIDR no address is in: none');
});

t.test("primary: the Node's first address of each family, not the interfaces'", async (t) => {
  const spec = parseNodePortAddresses('primary');
  t.same(nodePortIPs(spec, 4, NODE, LOCAL), ['192.168.1.10']);
  t.same(nodePortIPs(spec, 6, NODE, LOCAL), ['fd00:1::10']);
  const v4only: NodeInfo = { name: 'n1', addresses: ['192.168.1.10'] };
  t.same(nodePortIPs(spec, 6, v4only, LOCAL), ['fd00:1::10', 'fd00:10:244::1'], 'no IPv6 primary: every IPv6 address, as kube-proxy');
});

t.test('localhost NodePorts: the flag, and loopback inside the family set (never with primary)', async (t) => {
  const cases: Array<[string | undefined, boolean, boolean, boolean]> = [
    // flag value, --localhost-nodeports, IPv4, IPv6
    [undefined, true, true, true],
    [undefined, false, false, false],
    ['primary', true, false, false],
    ['192.168.1.0/24', true, false, true],
    ['127.0.0.0/8,192.168.1.0/24', true, true, true],
    ['127.0.0.1/32', true, true, true],
    ['0.0.0.0/0', true, true, true],
    ['fd00::/8', true, true, false],
    ['::1/128,fd00::/8', true, true, true],
    ['127.0.0.0/8', false, false, false],
  ];
  for (const [flag, on, v4, v6] of cases) {
    const spec = flag === undefined ? EVERY_NODE_ADDRESS : parseNodePortAddresses(flag);
    t.equal(localhostNodePorts(spec, 4, on), v4, `${flag ?? '(not given)'} ${on}: IPv4`);
    t.equal(localhostNodePorts(spec, 6, on), v6, `${flag ?? '(not given)'} ${on}: IPv6`);
  }
});

t.test('the incremental model: NodePort frontends follow the rule and the interfaces, other Services stay', async (t) => {
  const obj = (raw: unknown) => {
    const r = validateObject(raw);
    if (!r.ok) throw new Error(JSON.stringify(r));
    return r.obj as Service;
  };
  const m = new IncrementalModel();
  m.upsertService(
    obj({
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: 'np', namespace: 'default' },
      spec: { type: 'NodePort', clusterIP: '10.96.0.5', ports: [{ port: 80, nodePort: 30080 }] },
    }),
  );
  m.upsertService(
    obj({
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: 'ci', namespace: 'default' },
      spec: { clusterIP: '10.96.0.6', ports: [{ port: 80 }] },
    }),
  );
  m.setNode({ name: 'n1', addresses: ['192.168.1.10'] });
  const nodePorts = () =>
    (m.allFrontends().get('default/np') ?? [])
      .filter((f) => f.type === 'NodePort')
      .map((f) => f.ip)
      .sort();
  m.takeChanges();
  t.same(nodePorts(), ['0.0.0.0', '192.168.1.10'], "the Node's address and the wildcard");

  m.setNodePortAddresses(EVERY_NODE_ADDRESS, ['192.168.1.10', '172.16.5.1']);
  let changes = m.takeChanges();
  t.same([...changes.services.keys()], ['default/np'], 'only the NodePort Service changed');
  t.same(nodePorts(), ['0.0.0.0', '172.16.5.1', '192.168.1.10'], "an interface's address joins");

  m.setNodePortAddresses(parseNodePortAddresses('172.16.0.0/12'), ['192.168.1.10', '172.16.5.1']);
  m.takeChanges();
  t.same(nodePorts(), ['0.0.0.0', '172.16.5.1'], 'only the address inside the CIDR; the wildcard stays (bind protection, localhost)');

  m.setNodePortAddresses(parseNodePortAddresses('172.16.0.0/12'), ['192.168.1.10', '172.16.5.1']);
  changes = m.takeChanges();
  t.equal(changes.services.size, 0, 'the same again: nothing recomputed to a change');
});
