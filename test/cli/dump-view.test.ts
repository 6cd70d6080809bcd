// svcmap dump's view of both families: IPv6 frontends and backends written
// [addr]:port, IPv4 first, each family in numeric order.
import t from 'tap';
import { buildDumpView, renderTable } from '../../src/cli/dump-view.ts';
import type { BackendValue, RevNatValue, SvcKey, SvcValue } from '../../src/maps/codecs.ts';

const master = (count: number, revNat: number): SvcValue => ({ backend_id: 0, rev_nat_id: revNat, count, flags: 1, algorithm: 0, affinity_timeout: 0 });
const slot = (id: number): SvcValue => ({ backend_id: id, rev_nat_id: 0, count: 0, flags: 0, algorithm: 0, affinity_timeout: 0 });
const key = (addr: string, s: number): SvcKey => ({ addr, port: 80, proto: 6, scope: 0, slot: s });
const be = (addr: string): BackendValue => ({ addr, port: 8080, proto: 6, state: 0, flags: 0, zone: 0 });

t.test('IPv6 frontends, in numeric order, with bracketed addresses', async (t) => {
  const services: Array<[SvcKey, SvcValue]> = [
    [key('fd00::10', 0), master(1, 1)], [key('fd00::10', 1), slot(1)],
    [key('fd00::2', 0), master(2, 2)], [key('fd00::2', 1), slot(1)],
  ];
  const view = buildDumpView(services, [[1, be('fd00:10:244::1')]], [[1, { addr: 'fd00::10', port: 80 }], [2, { addr: 'fd00::2', port: 80 }]] as Array<[number, RevNatValue]>);
  t.same(view.map((v) => v.frontend), ['[fd00::2]:80/TCP', '[fd00::10]:80/TCP'], 'numeric, not text, order');
  t.same(view[1]!.backends.map((b) => b.address), ['[fd00:10:244::1]:8080']);
  t.same(view[0]!.problems, ['slot 2 missing'], 'a broken IPv6 frontend is shown as broken');
  t.match(renderTable(view), /\[fd00::10\]:80\/TCP\s+ClusterIP\s+random\s+1\s+\[fd00:10:244::1\]:8080/);
});

t.test('a mixed list puts IPv4 first', async (t) => {
  const services: Array<[SvcKey, SvcValue]> = [[key('fd00::1', 0), master(0, 1)], [key('10.96.0.1', 0), master(0, 2)]];
  const view = buildDumpView(services, [], [[1, { addr: 'fd00::1', port: 80 }], [2, { addr: '10.96.0.1', port: 80 }]]);
  t.same(view.map((v) => v.frontend), ['10.96.0.1:80/TCP', '[fd00::1]:80/TCP']);
});
