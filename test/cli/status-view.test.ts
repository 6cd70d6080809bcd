// svcmap status's text from a report: its sections as tables, -o wide
// (the programs' tags and link pins, the maps' ids and pins, the devices'
// ifindexes), --no-headers (the rows only, sections an empty line apart).
import t from 'tap';
import type { NoFrames } from '../../src/agent/datapath/xdp-devices.ts';
import { type StatusReport, externalDevices, renderStatus } from '../../src/cli/status.ts';
import { countDsr } from '../../src/cli/status-lb-mode.ts';
import type { SvcKey, SvcValue } from '../../src/maps/codecs.ts';
import {
  SVC_F_CLUSTERIP,
  SVC_F_DSR,
  SVC_F_EXTERNALIP,
  SVC_F_LOADBALANCER,
  SVC_F_NODEPORT,
  SVC_F_TWO_SCOPES,
  SVC_SCOPE_EXT,
  SVC_SCOPE_INT,
} from '../../src/maps/constants.ts';
import { cells, checkTableStyles } from './table-styles.ts';

const report: StatusReport = {
  pinDir: '/sys/fs/bpf/svcmap-x',
  socketLb: 'host-only',
  veths: ['veth1a2b', 'veth3c4d'],
  socketLbBypass: [],
  dsr: { dsr: 0, fromOutside: 0 },
  devices: [
    { device: 'eth0', runs: 'xdp native' },
    { device: 'eth1', runs: 'tc only' },
  ],
  programs: [
    {
      link: 'svcmap_connect4',
      pin: '/sys/fs/bpf/svcmap-x/links/svcmap_connect4',
      program: 'svcmap_connect4',
      progId: 41,
      tag: 'a1b2c3d4e5f60718',
      attachType: 'cgroup/connect4',
      attachedTo: 'cgroup /sys/fs/cgroup/x',
      mode: 'cgroup link',
    },
    {
      link: 'tc ingress eth0',
      program: 'svcmap_tc_in',
      progId: 1207,
      tag: '0011223344556677',
      attachType: 'tc/ingress',
      attachedTo: 'device eth0',
      mode: 'tc filter (clsact)',
    },
  ],
  maps: [
    {
      name: 'svcmap_svc',
      id: 12,
      pin: '/sys/fs/bpf/svcmap-x/svcmap_svc',
      type: 'hash',
      entries: 2,
      maxEntries: 65536,
      fill: '0.0%',
      purpose: 'services: frontends and their backend slots',
    },
    {
      name: 'svcmap_affin',
      id: 130,
      pin: '/sys/fs/bpf/svcmap-x/svcmap_affin',
      type: 'lru_hash',
      entries: 0,
      maxEntries: 16,
      fill: '0.0%',
      purpose: 'session affinity',
    },
  ],
  counters: [
    { hook: 'connect4', reason: 'translated', packets: 12345, drop: false },
    { hook: 'connect4', reason: 'no_backend', packets: 7, drop: true },
  ],
  snatAddresses: [
    { ifindex: 2, device: 'eth0', addr: '192.168.1.10' },
    { ifindex: 9, addr: '10.0.0.1' },
  ],
};

/** The sections: runs of lines between empty ones. */
const sections = (text: string) =>
  text
    .trimEnd()
    .split('\n\n')
    .map((s) => s.split('\n'));
const rows = (s: string[]) => s.filter((l) => l.startsWith('  '));

t.test('the plain table: each section a title, a header and its rows', async (t) => {
  const text = renderStatus(report);
  t.match(
    text,
    /^pin directory: \/sys\/fs\/bpf\/svcmap-x\nsocket LB: host-only \(the node.s own sockets; pods. traffic is translated at their veths\)\npod veths with programs: veth1a2b, veth3c4d\nexternal devices: eth0 \(xdp native\), eth1 \(tc only\)\nlb mode: unknown \(the agent did not say\); direct server return on 0 of 0 frontends from outside\n\nPROGRAMS\n {2}ATTACH TYPE +PROGRAM +ID +ATTACHED\n {2}cgroup\/connect4 +svcmap_connect4 +41 +cgroup link on cgroup \/sys\/fs\/cgroup\/x\n/,
  );
  t.match(text, /^ {2}svcmap_svc +hash +2\/65536 +0\.0% +services: frontends/m);
  t.match(
    text,
    /SNAT ADDRESSES[^\n]*\n(?: {2}.*\n)* {2}eth0 +192\.168\.1\.10\n/,
    'a device and its address, as tc-nodeport.test.ts reads them',
  );
  t.match(text, /connect4\s+no_backend\s+7\s+drop/, 'drops marked, as datapath-counters.test.ts reads them');
  t.match(text, /^ {2}connect4 +translated +12345$/m, 'numbers to the right');
});

t.test('-o wide and --no-headers, section by section', async (t) => {
  const [plain, wide, bare] = [
    renderStatus(report),
    renderStatus(report, { wide: true, headers: true }),
    renderStatus(report, { wide: false, headers: false }),
  ];
  t.notMatch(bare, /pin directory|PROGRAMS|MAPS|SNAT ADDRESSES|DATAPATH COUNTERS/, '--no-headers: no titles');
  const [p, w, b] = [sections(plain).slice(1), sections(wide).slice(1), sections(bare)];
  t.equal(b.length, 4, '--no-headers: the four sections, an empty line apart');
  const names = ['programs', 'maps', 'SNAT addresses', 'counters'];
  const added = [['TAG', 'PIN'], ['ID', 'PIN'], ['IFINDEX'], []];
  for (let i = 0; i < 4; i++) checkTableStyles(t, { plain: rows(p[i]!), wide: rows(w[i]!), bare: b[i]! }, added[i]!, names[i]!);
  t.same(
    cells(rows(w[0]!)[2]!),
    ['tc/ingress', 'svcmap_tc_in', '1207', '0011223344556677', '-', 'tc filter (clsact) on device eth0'],
    'a classic tc filter has no pin',
  );
  t.same(cells(rows(w[1]!)[1]!), [
    'svcmap_svc',
    'hash',
    '2/65536',
    '0.0%',
    '12',
    '/sys/fs/bpf/svcmap-x/svcmap_svc',
    'services: frontends and their backend slots',
  ]);
  t.same(cells(rows(w[2]!)[2]!), ['ifindex 9', '9', '10.0.0.1']);
});

t.test('empty sections: a placeholder in the table, nothing without headers', async (t) => {
  const empty: StatusReport = {
    pinDir: '/p',
    programs: [],
    maps: [],
    counters: [],
    snatAddresses: [],
    socketLb: 'all',
    veths: [],
    socketLbBypass: [],
    devices: [],
    dsr: { dsr: 0, fromOutside: 0 },
  };
  t.equal(
    renderStatus(empty),
    'pin directory: /p\nsocket LB: all\npod veths with programs: (none)\nexternal devices: (none)\nlb mode: unknown (the agent did not say); direct server return on 0 of 0 frontends from outside\n\nPROGRAMS\n  (none attached)\n\nMAPS\n  (none pinned)\n\n' +
      "SNAT ADDRESSES (svcmap_devaddr, svcmap_devaddr6: a flow SNATed out of a device takes its address of the flow's family)\n  (none)\n\n" +
      'DATAPATH COUNTERS (not zero; svcmap_datapath_packets_total)\n  (all zero)\n',
  );
  t.equal(renderStatus(empty, { wide: true, headers: false }), '\n\n\n', 'four empty sections, an empty line apart');
  const onlyMaps = renderStatus({ ...empty, maps: report.maps }, { wide: false, headers: false });
  t.same(
    onlyMaps.split('\n').map((l) => l.trim().split(/ {2,}/)[0]),
    ['', 'svcmap_svc', 'svcmap_affin', '', '', ''],
    "the maps' rows in the second section",
  );
});

t.test('bypassed Pods: a line naming each with its cgroup id (none: no line)', async (t) => {
  const text = renderStatus({
    ...report,
    socketLb: 'all',
    socketLbBypass: [
      { pod: 'mesh/a', cgroupId: '4242' },
      { pod: 'mesh/b', cgroupId: '4343' },
    ],
  });
  t.match(
    text,
    /^pod veths with programs: veth1a2b, veth3c4d\npods bypassing the socket LB: mesh\/a \(cgroup 4242\), mesh\/b \(cgroup 4343\)\nexternal devices: eth0/m,
  );
  t.notMatch(renderStatus(report), /bypassing/);
});

t.test('external devices: XDP in front of tc where an xdp link runs, else tc only', async (t) => {
  const program = (attachType: string, name: string, device: string, mode: string) => ({
    link: `${name}@${device}`,
    program: name,
    progId: 1,
    tag: '',
    attachType,
    attachedTo: `device ${device}`,
    mode,
  });
  const programs = [
    program('tcx/ingress', 'svcmap_tc_in', 'eth1', 'tcx link'),
    program('tcx/egress', 'svcmap_tc_out', 'eth1', 'tcx link'),
    program('tcx/ingress', 'svcmap_tc_in', 'eth0', 'tcx link'),
    program('xdp', 'svcmap_xdp', 'eth0', 'xdp link (native)'),
    program('tc/ingress', 'svcmap_tc_in', 'br0', 'tc filter (clsact)'),
    program('xdp', 'svcmap_xdp', 'br0', 'xdp link (generic)'),
    program('xdp', 'svcmap_xdp', 'eth2', 'xdp link (not running)'),
    program('tcx/ingress', 'svcmap_tc_in', 'eth2', 'tcx link'),
  ];
  const asked: string[][] = [];
  const none = (devices: string[]) => {
    asked.push(devices);
    return new Map<string, NoFrames>();
  };
  t.same(externalDevices(programs, none), [
    { device: 'br0', runs: 'xdp generic' },
    { device: 'eth0', runs: 'xdp native' },
    { device: 'eth1', runs: 'tc only' },
    { device: 'eth2', runs: 'tc only' },
  ]);
  t.same(asked, [['eth0']], 'only the devices running XDP natively are asked whether they take XDP frames');
  const peerOff = () => new Map<string, NoFrames>([['eth0', 'peer']]);
  t.same(
    externalDevices(programs, peerOff).find((d) => d.device === 'eth0'),
    {
      device: 'eth0',
      runs: 'xdp native; forwarding left to tc: the peer takes no XDP frames',
    },
  );
});

t.test("the lb mode line: the agent's --lb-mode, and the frontends from outside that carry dsr in the pins", async (t) => {
  const entry = (addr: string, flags: number, slot = 0, scope = SVC_SCOPE_EXT): [SvcKey, SvcValue] => [
    { addr, port: 80, proto: 6, scope, slot },
    { backend_id: 0, rev_nat_id: 1, count: 1, flags, algorithm: 0, affinity_timeout: 0 },
  ];
  const counted = countDsr([
    entry('10.96.0.1', SVC_F_CLUSTERIP), // ClusterIP: not from outside
    entry('192.0.2.1', SVC_F_NODEPORT | SVC_F_DSR),
    entry('192.0.2.1', SVC_F_NODEPORT | SVC_F_DSR, 1), // a backend slot: not a frontend
    entry('0.0.0.0', SVC_F_NODEPORT | SVC_F_DSR | SVC_F_TWO_SCOPES),
    entry('0.0.0.0', SVC_F_NODEPORT | SVC_F_DSR, 0, SVC_SCOPE_INT), // the internal twin: the same frontend
    entry('203.0.113.1', SVC_F_LOADBALANCER),
    entry('198.51.100.1', SVC_F_EXTERNALIP | SVC_F_DSR),
  ]);
  t.same(counted, { dsr: 3, fromOutside: 4 });
  const agent = { healthz: 'http://127.0.0.1:10256/healthz', healthy: true, ready: true };
  t.match(
    renderStatus({ ...report, dsr: counted, agent: { ...agent, lbMode: 'hybrid' } }),
    /^external devices: .*\nlb mode: hybrid \(the agent's --lb-mode\); direct server return on 3 of 4 frontends from outside\n/m,
  );
  t.match(
    renderStatus({ ...report, dsr: { dsr: 0, fromOutside: 1 }, agent: { healthz: 'http://x/healthz', error: 'ECONNREFUSED' } }),
    /^lb mode: unknown \(the agent did not say\); direct server return on 0 of 1 frontend from outside$/m,
    'an agent that does not answer: the pins still say what they hold',
  );
});
