// Informers through API-server trouble: compaction + cut watches (410, relist), a
// restart with changes made while down, an outage. Every scenario ends with the
// informer's cache equal to the server's state.

import t, { type Test } from 'tap';
import {
  kubeConfigFor,
  recordingInformer,
  restartOnError,
  serverState,
  service,
  startServer,
  waitFor,
  type ApiServer,
  type RecordingInformer,
} from '../../lab/apiserver/index.ts';

const three = () => [
  service('a', { clusterIP: '10.0.0.1' }),
  service('b', { clusterIP: '10.0.0.2' }),
  service('c', { clusterIP: '10.0.0.3' }),
];

/** While the informer is cut off: one update, one delete, one create. */
function changeThings(server: ApiServer): void {
  server.update(service('a', { clusterIP: '10.0.0.11' }));
  server.delete('Service', 'default', 'b');
  server.create(service('d', { clusterIP: '10.0.0.4' }));
}

/** A server with three Services and a Service informer on it, its first watch open; restart: restarted on error by its owner. */
async function watching(t: Test, o: { restart: boolean }): Promise<{ server: ApiServer; rec: RecordingInformer }> {
  const server = await startServer(t, { objects: three() });
  const rec = recordingInformer(t, await kubeConfigFor(t, server), 'Service');
  if (o.restart) restartOnError(rec);
  await rec.informer.start();
  await server.waitForRequest({ watch: true });
  return { server, rec };
}

async function synced(t: Test, server: ApiServer, rec: RecordingInformer, what: string): Promise<void> {
  await waitFor(() => rec.cache().join() === serverState(server, 'Service').join(), what);
  t.same(rec.cache(), serverState(server, 'Service'), what);
}

t.test('compact + clean cut: the resumed watch gets 410, the informer relists by itself', async (t) => {
  const { server, rec } = await watching(t, { restart: false });
  const mark = server.mark();
  // All synchronous: the client cannot reconnect before the changes and the compaction.
  server.cutWatches('end');
  changeThings(server);
  server.compact();
  await synced(t, server, rec, 'cache equals server after the relist');
  await server.waitForRequest({ watch: true, since: mark, where: (r) => r.query['resourceVersion'] === server.resourceVersion });
  const after = server.requests({ since: mark, method: 'GET' });
  t.same(
    after.map((r) => (r.watch ? `watch rv=${r.query['resourceVersion']}` : 'list')),
    ['watch rv=1003', 'list', `watch rv=${server.resourceVersion}`],
  );
  t.same(rec.errors(), [], 'a 410 is not reported as an error');
  t.same(
    rec.events
      .filter((e) => ['add', 'update', 'delete'].includes(e.type))
      .slice(3)
      .map((e) => `${e.type} ${e.name}`)
      .sort(),
    ['add d', 'delete b', 'update a'],
    'the relist diff arrives as events',
  );
});

t.test('compact + abrupt cut: error, restart by the owner, 410, relist', async (t) => {
  const { server, rec } = await watching(t, { restart: true });
  const mark = server.mark();
  server.cutWatches('destroy');
  changeThings(server);
  server.compact();
  await synced(t, server, rec, 'cache equals server');
  t.equal(rec.errors().length, 1, 'the broken stream was one error');
  t.match(rec.errors()[0], { name: 'TypeError', message: 'terminated' });
  t.ok(server.lists('Service', mark).length === 1, 'exactly one relist');
  const w = server.watches('Service', mark);
  t.equal(w[0]!.query['resourceVersion'], '1003', 'the restarted informer first resumed from its old RV');
});

t.test('server restart with changes while down (fresh watch cache): relist', async (t) => {
  const { server, rec } = await watching(t, { restart: true });
  const port = server.port;
  await server.stop();
  await waitFor(() => rec.errors().length >= 2, 'the informer to fail, and fail again while down');
  t.match(rec.errors()[1], { message: 'fetch failed', cause: { code: 'ECONNREFUSED' } });
  changeThings(server);
  const mark = server.mark();
  await server.restart();
  t.equal(server.port, port);
  await synced(t, server, rec, 'cache equals server after restart');
  t.equal(server.lists('Service', mark).length, 1, 'relisted once');
  t.equal(server.watches('Service', mark)[0]!.status, 200);
});

t.test('server restart keeping its history: the watch resumes, no relist', async (t) => {
  const { server, rec } = await watching(t, { restart: true });
  await server.stop();
  changeThings(server);
  const mark = server.mark();
  await server.restart({ keepHistory: true });
  await synced(t, server, rec, 'cache equals server');
  t.equal(server.lists('Service', mark).length, 0, 'no relist');
  t.equal(server.watches('Service', mark)[0]!.query['resourceVersion'], '1003');
});

t.test('server restart with a replaced store and a resourceVersion jump', async (t) => {
  const { server, rec } = await watching(t, { restart: true });
  await server.stop();
  await server.restart({
    resourceVersionJump: 5000,
    objects: [service('a', { clusterIP: '10.0.0.1' }), service('z', { clusterIP: '10.0.0.26' })],
  });
  t.ok(Number(server.resourceVersion) > 6000);
  await synced(t, server, rec, 'cache equals the replaced store');
  t.same(
    rec.cache().map((s) => s.split('@')[0]),
    ['default/a', 'default/z'],
  );
});

t.test('an outage (connection refused) with changes meanwhile', async (t) => {
  const { server, rec } = await watching(t, { restart: true });
  const outage = server.unavailable(300);
  await waitFor(() => rec.errors().length >= 2, 'errors while down');
  changeThings(server);
  await outage;
  await synced(t, server, rec, 'cache equals server after the outage');
  t.ok(rec.errors().every((e) => e instanceof Error));
});

t.test('an outage answering 503: list and watch errors, then recovery', async (t) => {
  const { server, rec } = await watching(t, { restart: true });
  const outage = server.unavailable(300, { mode: '503' });
  server.compact(); // the informer will have to relist, during the outage at first
  await waitFor(() => rec.errors().some((e) => (e as { statusCode?: number }).statusCode === 503), 'a 503 from the watch');
  changeThings(server);
  server.compact();
  await outage;
  await synced(t, server, rec, 'cache equals server after the outage');
  t.ok(server.requests({ method: 'GET' }).some((r) => r.status === 503));
});
