// What @kubernetes/client-node 2.0.1's informer (ListWatch + Watch) does on each kind of
// trouble, pinned down so that lab/apiserver/README.md stays true and svcmap's
// Kubernetes source can rely on it. If client-node changes, these fail first.

import t from 'tap';
import { Watch } from '@kubernetes/client-node';
import { kubeConfigFor, recordingInformer, service, sleep, startServer, waitFor } from '../../lab/apiserver/index.ts';

const kinds = (rec: { events: Array<{ type: string }> }) => rec.events.map((e) => e.type);

t.test('clean end of the watch stream: rewatch from the last RV, no relist, no error', async (t) => {
  const server = await startServer(t, { objects: [service('a')] });
  const kc = await kubeConfigFor(t, server);
  const rec = recordingInformer(t, kc, 'Service');
  await rec.informer.start();
  await server.waitForRequest({ watch: true });
  server.create(service('b'));
  await waitFor(() => rec.cache().length === 2, 'b');
  const mark = server.mark();
  server.cutWatches('end');
  const w = await server.waitForRequest({ watch: true, since: mark });
  t.equal(w.query['resourceVersion'], '1002', 'resumes from the RV of the last event');
  t.equal(server.lists('Service', mark).length, 0, 'no relist');
  t.same(kinds(rec), ['connect', 'add', 'add', 'connect'], "'connect' on every (re)connection, no 'error'");
});

t.test('ERROR 410 in the stream: relist, then watch from the new list RV; no error event', async (t) => {
  const server = await startServer(t, { objects: [service('a'), service('b')] });
  const kc = await kubeConfigFor(t, server);
  const delays: number[] = [];
  const rec = recordingInformer(t, kc, 'Service', { delayFn: async (ms) => void delays.push(ms) });
  await rec.informer.start();
  await server.waitForRequest({ watch: true });
  const mark = server.mark();
  server.cutWatches('end');
  server.delete('Service', 'default', 'a');
  server.create(service('c'));
  server.compact();
  await server.waitForRequest({ watch: true, since: mark, where: (r) => r.query['resourceVersion'] === '1004' });
  const seq = server
    .requests({ since: mark })
    .map((r) => (r.watch ? `watch ${r.query['resourceVersion']}` : `list ${JSON.stringify(r.query)}`));
  t.same(seq, ['watch 1002', 'list {}', 'watch 1004']);
  t.same(
    kinds(rec),
    ['connect', 'add', 'add', 'connect', 'connect', 'delete', 'add'],
    'the relist is diffed: delete a, add c, nothing for unchanged b',
  );
  t.same(rec.errors(), []);
  t.same(delays, [1000], 'the relist is immediate, the watch after it waits out the back-off (an ERROR event does not reset it)');
});

t.test('connection cut mid-stream (FIN or RST): one error event, then the informer is stopped', async (t) => {
  for (const mode of ['destroy', 'reset'] as const) {
    const server = await startServer(t, { objects: [service('a')] });
    const kc = await kubeConfigFor(t, server);
    const delays: number[] = [];
    const rec = recordingInformer(t, kc, 'Service', { delayFn: async (ms) => void delays.push(ms) });
    await rec.informer.start();
    await server.waitForRequest({ watch: true });
    const mark = server.mark();
    server.cutWatches(mode);
    await waitFor(() => rec.errors().length === 1, `the ${mode} error`);
    // undici's cause depends on the connection: "other side closed" (UND_ERR_SOCKET) or
    // ECONNRESET on a keep-alive socket, HTTPParserError "Invalid EOF state" on a
    // Connection: close one. The error itself is always TypeError "terminated".
    t.match(rec.errors()[0], { name: 'TypeError', message: 'terminated', cause: Error }, mode);
    // With an instant delayFn any retry would be immediate; there is none.
    await sleep(150);
    t.same(server.requests({ since: mark }), [], `${mode}: no retry of its own`);
    t.same(delays, []);
    // start() again resumes the watch from the kept RV: no list.
    await rec.informer.start();
    const w = await server.waitForRequest({ watch: true, since: mark });
    t.equal(w.query['resourceVersion'], '1001');
    t.equal(server.lists('Service', mark).length, 0, `${mode}: start() after an error skips the list`);
  }
});

t.test('connection refused: error (fetch failed / ECONNREFUSED), informer stopped; start() resolves, never rejects', async (t) => {
  const server = await startServer(t, { objects: [service('a')] });
  const kc = await kubeConfigFor(t, server);
  const rec = recordingInformer(t, kc, 'Service');
  await server.stop();
  await t.resolves(rec.informer.start(), 'a failed list does not reject start()');
  t.same(kinds(rec), ['connect', 'error']);
  t.match(rec.errors()[0], { name: 'TypeError', message: 'fetch failed', cause: { code: 'ECONNREFUSED' } }, 'from the list');
  await server.restart();
  await rec.informer.start();
  t.equal(rec.cache().length, 1, 'a start() with no RV lists');
  await server.waitForRequest({ watch: true });
  await server.stop();
  await waitFor(() => rec.errors().length === 2, 'the watch to break');
  await rec.informer.start();
  t.match(rec.errors()[2], { name: 'TypeError', message: 'fetch failed', cause: { code: 'ECONNREFUSED' } }, 'from the watch');
  t.same(kinds(rec), ['connect', 'error', 'connect', 'add', 'error', 'connect', 'error']);
});

t.test('HTTP errors: 503 on the list is an ApiException (code), on the watch an Error (statusCode)', async (t) => {
  const server = await startServer(t, { objects: [service('a')] });
  const kc = await kubeConfigFor(t, server);
  const rec = recordingInformer(t, kc, 'Service');
  const outage = server.unavailable(60_000, { mode: '503' });
  await rec.informer.start();
  const listErr = rec.errors()[0] as { code: number; body: string; message: string };
  t.match(listErr, { code: 503, message: /^HTTP-Code: 503\nMessage: Unknown API Status Code!/ }, 'list: ApiException');
  t.equal(JSON.parse(listErr.body).reason, 'ServiceUnavailable', 'its body is the Status as a JSON string');
  await server.restart(); // ends the outage
  await outage;
  await rec.informer.start();
  await server.waitForRequest({ watch: true });
  const again = server.unavailable(60_000, { mode: '503' });
  await waitFor(() => rec.errors().length === 2, 'the cut watch');
  await rec.informer.start();
  t.match(rec.errors()[2], { message: 'Service Unavailable', statusCode: 503 }, 'watch: plain Error with statusCode');
  t.equal(rec.informer.latestResourceVersion(), '1001', 'the RV is kept through errors');
  await server.restart();
  await again;
});

t.test('reconnect back-off: watches that end without events wait 1s, 2s, 4s ... 30s; any event resets it', async (t) => {
  const server = await startServer(t, { objects: [service('a')] });
  const kc = await kubeConfigFor(t, server);
  const delays: number[] = [];
  const rec = recordingInformer(t, kc, 'Service', { delayFn: async (ms) => void delays.push(ms) });
  let mark = server.mark();
  await rec.informer.start();
  const cutNext = async (): Promise<void> => {
    await server.waitForRequest({ watch: true, since: mark });
    await waitFor(() => server.openWatches === 1, 'the watch to be open');
    mark = server.mark();
    server.cutWatches('end');
  };
  for (let i = 0; i < 8; i++) await cutNext();
  await server.waitForRequest({ watch: true, since: mark });
  t.same(delays, [1000, 2000, 4000, 8000, 16000, 30000, 30000], 'the first reconnect is immediate, then doubling, capped at 30 s');
  server.create(service('b'));
  await waitFor(() => rec.cache().length === 2, 'an event');
  await cutNext();
  await cutNext();
  await server.waitForRequest({ watch: true, since: mark });
  t.same(delays.slice(7), [1000], 'after an event: immediate, then 1 s again');
  t.same(rec.errors(), []);
});

t.test('client-side inactivity timeout (Watch.requestTimeoutMs, 30 s by default): immediate rewatch, same RV, no error', async (t) => {
  const server = await startServer(t, { objects: [service('a')] });
  const kc = await kubeConfigFor(t, server);
  const watch = new Watch(kc);
  t.equal((watch as unknown as { requestTimeoutMs: number }).requestTimeoutMs, 30_000, 'the default');
  (watch as unknown as { requestTimeoutMs: number }).requestTimeoutMs = 100;
  const delays: number[] = [];
  const rec = recordingInformer(t, kc, 'Service', { watch, delayFn: async (ms) => void delays.push(ms) });
  await rec.informer.start();
  await waitFor(() => server.watches().length >= 3, 'three watches');
  await rec.stop();
  t.same(new Set(server.watches().map((r) => r.query['resourceVersion'])), new Set(['1001']));
  t.equal(server.lists().length, 1, 'no relist');
  t.same(delays, [], 'no back-off after a client timeout');
  t.same(
    rec.errors().filter((e) => (e as Error).name !== 'AbortError'),
    [],
    'no error event (the AbortError is from stop())',
  );
});

t.test('stop() with an open watch emits an AbortError on the error callbacks', async (t) => {
  const server = await startServer(t, { objects: [service('a')] });
  const kc = await kubeConfigFor(t, server);
  const rec = recordingInformer(t, kc, 'Service');
  await rec.informer.start();
  await server.waitForRequest({ watch: true });
  await rec.stop();
  await waitFor(() => rec.errors().length === 1, 'the error');
  t.match(rec.errors()[0], { name: 'AbortError' });
});

t.test('what the informer sends and what its cache holds', async (t) => {
  const server = await startServer(t, { objects: [service('a')] });
  const kc = await kubeConfigFor(t, server);
  const rec = recordingInformer(t, kc, 'Service', { labelSelector: 'x!=y' });
  await rec.informer.start();
  await server.waitForRequest({ watch: true });
  t.same(server.lists()[0]!.query, { labelSelector: 'x!=y' }, 'the list is whatever the list function sends');
  t.same(
    server.watches()[0]!.query,
    { watch: 'true', resourceVersion: '1001', labelSelector: 'x!=y' },
    'the watch: no allowWatchBookmarks, no timeoutSeconds',
  );
  server.create(service('b'));
  await waitFor(() => rec.cache().length === 2, 'b');
  const listed = rec.informer.get('a', 'default')!;
  const watched = rec.informer.get('b', 'default')!;
  t.equal(listed.kind, undefined, 'list items have no kind');
  t.ok(listed.metadata!.creationTimestamp instanceof Date, 'list items went through the ObjectSerializer: Date');
  t.equal(watched.kind, 'Service', 'watched objects are the raw JSON: kind set');
  t.equal(typeof watched.metadata!.creationTimestamp, 'string', 'and timestamps are strings');
});
