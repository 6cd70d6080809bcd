// Reading the node's network for the tc datapath: /proc/net/route rows, the
// devices and their primary addresses, the default --devices, and the
// writes that keep svcmap_devaddr in step (new and changed entries before
// stale ones go; nothing rewritten that did not change).
import type { NetworkInterfaceInfo } from 'node:os';
import t from 'tap';
import { syncDeviceAddresses } from '../../src/agent/datapath/device-addresses.ts';
import {
  type HostNet,
  defaultDevices,
  deviceAddresses,
  hostDevices,
  parseProcNetIpv6Route,
  parseProcNetRoute,
} from '../../src/agent/datapath/host-net.ts';
import { BpfMap } from '../../src/bpf/map.ts';
import { devAddrMap } from '../../src/maps/registry.ts';
import { TypedMap } from '../../src/maps/typed-map.ts';

// As the kernel prints it (fib_route_seq_show): addresses are the raw __be32 in host-order hex.
const PROC_NET_ROUTE = `Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT
eth0\t00000000\t0164A8C0\t0003\t0\t0\t0\t00000000\t0\t0\t0
eth0\t0064A8C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0
eth1\t0002F40A\t0232A8C0\t0003\t0\t0\t0\t00FFFFFF\t0\t0\t0
br0\t0001F40A\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0
*\t0000FA0A\t00000000\t0201\t0\t0\t0\t0000FFFF\t0\t0\t0
eth2\t0000FB0A\t0233A8C0\t0002\t0\t0\t0\t0000FFFF\t0\t0\t0
`;

t.test('/proc/net/route: default and gateway routes by device; deviceless and down routes skipped', async (t) => {
  t.same(parseProcNetRoute(PROC_NET_ROUTE), [
    { device: 'eth0', isDefault: true, viaGateway: true },
    { device: 'eth0', isDefault: false, viaGateway: false },
    { device: 'eth1', isDefault: false, viaGateway: true },
    { device: 'br0', isDefault: false, viaGateway: false },
  ]);
  t.same(parseProcNetRoute(''), []);
});

// As the kernel prints it (ipv6_route_native_seq_show): a connected /64, a link-local one, the default via a router,
// a local address on lo, a blackhole (RTF_REJECT, on lo), a route through a gateway on eth1, one that is down.
const PROC_NET_IPV6_ROUTE = `fd000000000000000000000000000000 40 00000000000000000000000000000000 00 00000000000000000000000000000000 00000100 00000001 00000000 00000001     eth0
fe800000000000000000000000000000 40 00000000000000000000000000000000 00 00000000000000000000000000000000 00000100 00000002 00000000 00000001     eth0
00000000000000000000000000000000 00 00000000000000000000000000000000 00 fd000000000000000000000000000001 00000400 00000002 00000000 00000003     eth0
fd000000000000000000000000000002 80 00000000000000000000000000000000 00 00000000000000000000000000000000 00000000 00000003 00000000 80200001       lo
fd0000000000000a0000000000000000 40 00000000000000000000000000000000 00 00000000000000000000000000000000 00000400 00000001 00000000 00200200       lo
fd001000024400020000000000000000 40 00000000000000000000000000000000 00 fd000000000000000000000000000009 00000400 00000001 00000000 00000003     eth1
fd001000024400030000000000000000 40 00000000000000000000000000000000 00 fd000000000000000000000000000009 00000400 00000001 00000000 00000002     eth2
`;

t.test('/proc/net/ipv6_route: default and gateway routes by device; rejecting and down routes skipped', async (t) => {
  t.same(parseProcNetIpv6Route(PROC_NET_IPV6_ROUTE), [
    { device: 'eth0', isDefault: false, viaGateway: false },
    { device: 'eth0', isDefault: false, viaGateway: false },
    { device: 'eth0', isDefault: true, viaGateway: true },
    { device: 'lo', isDefault: false, viaGateway: false },
    { device: 'eth1', isDefault: false, viaGateway: true },
  ]);
  t.same(parseProcNetIpv6Route(''), []);
  const net: HostNet = {
    devices: [
      { name: 'eth0', ifindex: 2, addrs: [], addr6: 'fd00::5', addrs6: ['fd00::5'] },
      { name: 'eth1', ifindex: 3, addrs: [], addr6: 'fd00:50::5', addrs6: ['fd00:50::5'] },
    ],
    routes: parseProcNetIpv6Route(PROC_NET_IPV6_ROUTE),
  };
  t.same(
    defaultDevices(net, ['fd00::5']),
    ['eth0', 'eth1'],
    "an IPv6-only node: its address's device and the one with an IPv6 gateway route",
  );
});

const v4 = (address: string, internal = false): NetworkInterfaceInfo => ({
  address,
  netmask: '255.255.255.0',
  family: 'IPv4',
  mac: '00:00:00:00:00:00',
  internal,
  cidr: `${address}/24`,
});
const v6: NetworkInterfaceInfo = {
  address: 'fe80::1',
  netmask: 'ffff:ffff:ffff:ffff::',
  family: 'IPv6',
  mac: '00:00:00:00:00:00',
  internal: false,
  cidr: 'fe80::1/64',
  scopeid: 2,
};

const v6g = (address: string, internal = false): NetworkInterfaceInfo => ({
  address,
  netmask: 'ffff:ffff:ffff:ffff::',
  family: 'IPv6',
  mac: '00:00:00:00:00:00',
  internal,
  cidr: `${address}/64`,
  scopeid: 0,
});

t.test(
  'devices: the first IPv4 address the kernel lists is the SNAT address, and the first global IPv6 one; loopback and link-local-only devices left out',
  async (t) => {
    const index: Record<string, number> = { lo: 1, eth0: 2, eth1: 3, v6only: 4, v6global: 5 };
    const devices = hostDevices(
      {
        lo: [v4('127.0.0.1', true), v6g('::1', true)],
        eth1: [v4('192.168.50.1'), v4('192.168.60.1')],
        eth0: [v6, v4('192.168.100.11'), v6g('fd00:10::11'), v6g('fd00:20::11')],
        v6only: [v6],
        v6global: [v6, v6g('fd00:30::5')],
        gone: [v4('10.0.0.9')],
      },
      (name) => {
        const i = index[name];
        if (i === undefined) throw new Error(`no network interface ${name}`);
        return i;
      },
    );
    t.same(
      devices,
      [
        {
          name: 'eth0',
          ifindex: 2,
          addr: '192.168.100.11',
          addrs: ['192.168.100.11'],
          addr6: 'fd00:10::11',
          addrs6: ['fd00:10::11', 'fd00:20::11'],
        },
        { name: 'eth1', ifindex: 3, addr: '192.168.50.1', addrs: ['192.168.50.1', '192.168.60.1'], addrs6: [] },
        { name: 'v6global', ifindex: 5, addrs: [], addr6: 'fd00:30::5', addrs6: ['fd00:30::5'] },
      ],
      'sorted by ifindex; a device gone since getifaddrs is skipped',
    );
    t.same(
      [...deviceAddresses({ devices, routes: [] })],
      [
        [2, '192.168.100.11'],
        [3, '192.168.50.1'],
      ],
    );
    t.same(
      [...deviceAddresses({ devices, routes: [] }, 6)],
      [
        [2, 'fd00:10::11'],
        [5, 'fd00:30::5'],
      ],
      'IPv6: devices with a global address',
    );
  },
);

t.test('default devices: those holding a node address, and those with a default route or a route through a gateway', async (t) => {
  const net: HostNet = {
    devices: [
      { name: 'eth0', ifindex: 2, addr: '192.168.100.11', addrs: ['192.168.100.11'], addrs6: ['fd00:10::11'] },
      { name: 'eth1', ifindex: 3, addr: '192.168.50.1', addrs: ['192.168.50.1'], addrs6: [] },
      { name: 'br0', ifindex: 4, addr: '10.244.1.1', addrs: ['10.244.1.1'], addrs6: [] },
      { name: 'mgmt', ifindex: 5, addr: '172.16.0.5', addrs: ['172.16.0.5'], addrs6: [] },
    ],
    routes: parseProcNetRoute(PROC_NET_ROUTE),
  };
  t.same(defaultDevices(net, ['192.168.100.11']), ['eth0', 'eth1'], 'the pod bridge (connected routes only) is not one');
  t.same(defaultDevices(net, ['172.16.0.5']), ['eth0', 'eth1', 'mgmt'], "the InternalIP's device, whatever its routes");
  t.same(defaultDevices(net, ['fd00:10::11']), ['eth0', 'eth1'], 'an IPv6 node address picks its device too');
  t.same(
    defaultDevices({ devices: net.devices, routes: [{ device: 'lo', isDefault: false, viaGateway: true }] }, ['192.168.100.11']),
    ['eth0'],
    'never lo',
  );
  t.same(defaultDevices(net, []), [], 'the Node not known yet: none');
  t.same(
    defaultDevices(net, ['10.99.0.1']),
    [],
    "no device here holds the node's addresses (not the node's namespace): none, whatever the routes",
  );
});

t.test('svcmap_devaddr writes: changed and new entries first, then the stale ones; unchanged ones untouched', async (t) => {
  const raw = BpfMap.create(1 /* BPF_MAP_TYPE_HASH */, 'tst_devaddr', 4, 4, 16);
  t.teardown(() => raw.close());
  const map = new TypedMap(devAddrMap, raw);
  t.same(
    syncDeviceAddresses(
      map,
      new Map([
        [2, '192.168.100.11'],
        [3, '192.168.50.1'],
      ]),
    ),
    {
      set: new Map([
        [2, '192.168.100.11'],
        [3, '192.168.50.1'],
      ]),
      removed: [],
    },
  );
  const ops: string[] = [];
  const put = map.put.bind(map);
  const del = map.delete.bind(map);
  map.put = (k, v) => {
    ops.push(`put ${k} ${v.addr}`);
    put(k, v);
  };
  map.delete = (k) => {
    ops.push(`delete ${k}`);
    return del(k);
  };
  const r = syncDeviceAddresses(
    map,
    new Map([
      [3, '192.168.60.1'],
      [7, '10.0.0.7'],
    ]),
  );
  t.same(ops, ['put 3 192.168.60.1', 'put 7 10.0.0.7', 'delete 2'], 'eth1 changed and a new device in place before the stale entry goes');
  t.same(r, {
    set: new Map([
      [3, '192.168.60.1'],
      [7, '10.0.0.7'],
    ]),
    removed: [2],
  });
  t.same(
    new Map(map.entries().map(([k, v]) => [k, v.addr])),
    new Map([
      [3, '192.168.60.1'],
      [7, '10.0.0.7'],
    ]),
  );
  ops.length = 0;
  t.same(
    syncDeviceAddresses(
      map,
      new Map([
        [3, '192.168.60.1'],
        [7, '10.0.0.7'],
      ]),
    ),
    { set: new Map(), removed: [] },
  );
  t.same(ops, [], 'nothing written when nothing changed');
});
