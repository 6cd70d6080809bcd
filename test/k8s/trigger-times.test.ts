// The network programming latency through relists, on lab/apiserver with the
// real informers, the agent's sync loop and real BPF maps (fixtures.ts). The
// initial list and every relist deliver slices again, with the trigger times
// of changes made before the agent started or already programmed: none of
// those may be observed. A change made after the start is observed once,
// also when the watch missed it and only the relist (after a 410) brought it.
import t from 'tap';
import { endpointSlice, node, service } from '../../lab/apiserver/objects.ts';
import { kubeConfigFor } from '../../lab/apiserver/informers.ts';
import { startServer } from '../../lab/apiserver/testing.ts';
import { LAST_CHANGE_TRIGGER_TIME } from '../../src/model/schemas.ts';
import { eventually, startSync } from './fixtures.ts';

const ips = (n: number, from = 1) => Array.from({ length: n }, (_, i) => `10.244.1.${from + i}`);
const svc = (name: string, vip: string) => service(name, { clusterIP: vip, ports: [{ name: 'http', port: 80, targetPort: 8080 }] });
const slice = (name: string, owner: string, addrs: string[], trigger?: Date) =>
  endpointSlice(name, {
    service: owner,
    ports: [{ name: 'http', port: 8080 }],
    endpoints: addrs.map((a) => ({ addresses: [a] })),
    ...(trigger ? { annotations: { [LAST_CHANGE_TRIGGER_TIME]: trigger.toISOString() } } : {}),
  });
const ago = (ms: number) => new Date(Date.now() - ms);

t.test('relists re-deliver old trigger times: never observed; a change after the start: observed once', async (t) => {
  const server = await startServer(t, {
    objects: [
      svc('web', '10.96.0.10'),
      slice('web-a', 'web', ips(2), ago(3_600_000)),
      svc('api', '10.96.0.11'),
      slice('api-a', 'api', ips(1, 10), ago(5_000)),
      node('node1', { internalIP: '192.168.1.1' }),
    ],
  });
  const h = startSync(await kubeConfigFor(t, server));
  t.teardown(() => h.stop());
  const has = (vip: string, n: number) => () =>
    h.frontends().get(`${vip}:80/TCP`)?.length === n ? undefined : `${vip}: ${JSON.stringify(h.frontends().get(`${vip}:80/TCP`))}`;
  const observed = async () =>
    Number(/_count (\d+)/.exec(await h.metrics.registry.getSingleMetricAsString('svcmap_network_programming_duration_seconds'))?.[1]);
  await h.source.synced;
  await eventually(() => (h.status.health.ready ? undefined : 'no full sync yet'));
  await eventually(has('10.96.0.10', 2));
  await eventually(has('10.96.0.11', 1));
  t.equal(await observed(), 0, 'the initial list: trigger times from before the start are not observed');

  // A change after the start.
  server.update(slice('web-a', 'web', ips(3), new Date()));
  await eventually(has('10.96.0.10', 3));
  t.equal(await observed(), 1, 'a change after the start is observed');

  // Watches cut; a change they miss; history compacted: the resumed watches get 410 and relist.
  let mark = server.mark();
  server.cutWatches('end');
  server.update(slice('api-a', 'api', ips(2, 10), new Date()));
  server.compact();
  await server.waitForRequest({ since: mark, kind: 'EndpointSlice', watch: false });
  await eventually(has('10.96.0.11', 2));
  t.equal(await observed(), 2, 'the relist: the change the watch missed is observed once, the re-delivered ones are not');

  // Another relist with nothing changed in any slice (the Service created moves the resourceVersion on).
  mark = server.mark();
  server.cutWatches('end');
  server.create(svc('sentinel', '10.96.0.12'));
  server.compact();
  await server.waitForRequest({ since: mark, kind: 'EndpointSlice', watch: false });
  // Its slice comes after the relist: once it is in the maps, the relist before it was synced too.
  server.create(slice('sentinel-a', 'sentinel', ips(1, 20)));
  await eventually(has('10.96.0.12', 1));
  t.ok(server.lists('EndpointSlice', mark).length >= 1, 'the slices were listed again');
  t.equal(await observed(), 2, 'nothing re-observed after the second relist');
  t.same(h.syncer.violations, [], 'no reader ever saw fewer backends than before and after a sync');
});
