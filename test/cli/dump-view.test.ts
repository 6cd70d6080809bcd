// svcmap dump's view of both families: IPv6 frontends and backends written
// [addr]:port, IPv4 first, each family in numeric order; each backend's zone
// and live count.
import t from 'tap';
import { buildDumpView, renderTable, zoneNames } from '../../src/cli/dump-view.ts';
import { cells, checkTableStyles } from './table-styles.ts';
import type { BackendConns, BackendValue, RevNatValue, SvcKey, SvcValue } from '../../src/maps/codecs.ts';
import { SVC_F_DSR, SVC_F_NODEPORT } from '../../src/maps/constants.ts';

const master = (count: number, revNat: number): SvcValue => ({
  backend_id: 0,
  rev_nat_id: revNat,
  count,
  flags: 1,
  algorithm: 0,
  affinity_timeout: 0,
});
const slot = (id: number): SvcValue => ({ backend_id: id, rev_nat_id: 0, count: 0, flags: 0, algorithm: 0, affinity_timeout: 0 });
const key = (addr: string, s: number): SvcKey => ({ addr, port: 80, proto: 6, scope: 0, slot: s });
const be = (addr: string): BackendValue => ({ addr, port: 8080, proto: 6, state: 0, flags: 0, zone: 0 });

t.test('IPv6 frontends, in numeric order, with bracketed addresses', async (t) => {
  const services: Array<[SvcKey, SvcValue]> = [
    [key('fd00::10', 0), master(1, 1)],
    [key('fd00::10', 1), slot(1)],
    [key('fd00::2', 0), master(2, 2)],
    [key('fd00::2', 1), slot(1)],
  ];
  const view = buildDumpView(services, [[1, be('fd00:10:244::1')]], [
    [1, { addr: 'fd00::10', port: 80 }],
    [2, { addr: 'fd00::2', port: 80 }],
  ] as Array<[number, RevNatValue]>);
  t.same(
    view.map((v) => v.frontend),
    ['[fd00::2]:80/TCP', '[fd00::10]:80/TCP'],
    'numeric, not text, order',
  );
  t.same(
    view[1]!.backends.map((b) => b.address),
    ['[fd00:10:244::1]:8080'],
  );
  t.same(view[0]!.problems, ['slot 2 missing'], 'a broken IPv6 frontend is shown as broken');
  t.match(renderTable(view), /\[fd00::10\]:80\/TCP\s+ClusterIP\s+random\s+1\s+\[fd00:10:244::1\]:8080/);
});

t.test('a mixed list puts IPv4 first', async (t) => {
  const services: Array<[SvcKey, SvcValue]> = [
    [key('fd00::1', 0), master(0, 1)],
    [key('10.96.0.1', 0), master(0, 2)],
  ];
  const view = buildDumpView(
    services,
    [],
    [
      [1, { addr: 'fd00::1', port: 80 }],
      [2, { addr: '10.96.0.1', port: 80 }],
    ],
  );
  t.same(
    view.map((v) => v.frontend),
    ['10.96.0.1:80/TCP', '[fd00::1]:80/TCP'],
  );
});

t.test('each backend with its zone by name and its live count; an id without a name says so', async (t) => {
  const services: Array<[SvcKey, SvcValue]> = [
    [key('10.96.0.9', 0), { ...master(3, 1), algorithm: 3 }],
    [key('10.96.0.9', 1), slot(1)],
    [key('10.96.0.9', 2), slot(2)],
    [key('10.96.0.9', 3), slot(3)],
  ];
  const backends: Array<[number, BackendValue]> = [
    [1, { ...be('10.244.0.1'), zone: 1 }],
    [2, { ...be('10.244.0.2'), zone: 0 }],
    [3, { ...be('10.244.0.3'), zone: 7 }],
  ];
  const conns: Array<[number, BackendConns]> = [
    [1, { sock: 2n, tc: 1n }],
    [3, { sock: -1n, tc: 0n }],
  ];
  const view = buildDumpView(services, backends, [[1, { addr: '10.96.0.9', port: 80 }]], conns, zoneNames([[1, { name: 'zone-a' }]]));
  t.same(
    view[0]!.backends.map((b) => [b.address, b.zone, b.connections]),
    [
      ['10.244.0.1:8080', 'zone-a', 3],
      ['10.244.0.2:8080', undefined, 0],
      ['10.244.0.3:8080', 'zone#7', 0],
    ],
    'zone 0: none given; a negative count reads 0, as lc does',
  );
  t.match(renderTable(view), /10\.244\.0\.1:8080 zone=zone-a conns=3, 10\.244\.0\.2:8080 conns=0, 10\.244\.0\.3:8080 zone=zone#7 conns=0/);
  t.notOk('zone' in buildDumpView(services, backends, [])[0]!.backends[0]!, 'no zone map (older pins): no zone field');
});

t.test(
  '-o wide adds the rev-NAT id and the backend ids in slot order; --no-headers drops the header; the rows are the same otherwise',
  async (t) => {
    const services: Array<[SvcKey, SvcValue]> = [
      [key('10.96.0.9', 0), master(2, 11)],
      [key('10.96.0.9', 1), slot(3)],
      [key('10.96.0.9', 2), slot(1)],
      [key('10.96.0.10', 0), master(0, 12)],
      [key('10.96.0.11', 0), master(2, 13)],
      [key('10.96.0.11', 1), slot(1)],
    ];
    const backends: Array<[number, BackendValue]> = [
      [1, { ...be('10.244.0.1'), zone: 1 }],
      [3, be('10.244.0.3')],
    ];
    const view = buildDumpView(
      services,
      backends,
      [
        [11, { addr: '10.96.0.9', port: 80 }],
        [12, { addr: '10.96.0.10', port: 80 }],
      ],
      undefined,
      zoneNames([[1, { name: 'zone-a' }]]),
    );
    const lines = (wide: boolean, headers: boolean) => renderTable(view, { wide, headers }).trimEnd().split('\n');
    checkTableStyles(
      t,
      { plain: lines(false, true), wide: lines(true, true), bare: lines(false, false) },
      ['REV-NAT', 'BACKEND-IDS'],
      'dump',
    );
    t.same(lines(true, true).map(cells), [
      ['FRONTEND', 'FLAGS', 'ALG', 'N', 'REV-NAT', 'BACKEND-IDS', 'BACKENDS'],
      ['10.96.0.9:80/TCP', 'ClusterIP', 'random', '2', '11', '3,1', '10.244.0.3:8080, 10.244.0.1:8080 zone=zone-a'],
      ['10.96.0.10:80/TCP', 'ClusterIP', 'random', '0', '12', '-', '(none: connections are refused)'],
      [
        '10.96.0.11:80/TCP',
        'ClusterIP',
        'random',
        '1',
        '13',
        '1',
        '10.244.0.1:8080 zone=zone-a',
        '!! slot 2 missing; reverse NAT 13 missing',
      ],
    ]);
    t.same(lines(true, false).map(cells), lines(true, true).slice(1).map(cells), 'wide without headers: the wide rows');
    t.equal(renderTable([], { wide: false, headers: false }), '', 'no frontends, no headers: nothing at all');
  },
);

t.test("direct server return: the master entry's SVC_F_DSR shows as dsr among the flags", async (t) => {
  const services: Array<[SvcKey, SvcValue]> = [
    [key('192.0.2.10', 0), { ...master(1, 1), flags: SVC_F_NODEPORT | SVC_F_DSR }],
    [key('192.0.2.10', 1), slot(1)],
    [key('10.96.0.10', 0), master(1, 2)],
    [key('10.96.0.10', 1), slot(1)],
  ];
  const view = buildDumpView(
    services,
    [[1, be('10.244.0.1')]],
    [
      [1, { addr: '192.0.2.10', port: 80 }],
      [2, { addr: '10.96.0.10', port: 80 }],
    ],
  );
  t.same(
    view.map((v) => [v.frontend, v.flags]),
    [
      ['10.96.0.10:80/TCP', ['ClusterIP']],
      ['192.0.2.10:80/TCP', ['NodePort', 'dsr']],
    ],
  );
  t.match(renderTable(view), /^192\.0\.2\.10:80\/TCP\s+NodePort,dsr\s/m, 'the table');
});
