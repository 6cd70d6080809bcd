// The health endpoints fed by the real SyncStatus: /readyz says when the last
// sync succeeded and, while syncs fail and are retried, how many failed in a
// row; the failure counter is split by kind.
import pino from 'pino';
import t from 'tap';
import { serveHealth } from '../../src/agent/http-servers.ts';
import { AgentMetrics } from '../../src/agent/metrics.ts';
import { SyncStatus } from '../../src/agent/sync-status.ts';
import { ApplyError } from '../../src/sync/apply.ts';
import type { SyncReport } from '../../src/sync/syncer.ts';

const report = (full: boolean): SyncReport => ({
  full, changed: 1, deferred: [], durationMs: 1,
  ops: {
    backendUpserts: 0, revNatUpserts: 0, srcRangeUpserts: 0, slotUpserts: 0, masterUpserts: 1,
    masterDeletes: 0, slotDeletes: 0, revNatDeletes: 0, srcRangeDeletes: 0, backendDeletes: 0,
  },
  entries: { services: 1, backends: 0, revNat: 1, srcRanges: 0 },
});
const capacity = { services: 10, backends: 10, revNat: 10, srcRanges: 10 };

t.test('/readyz: the last successful sync, and the failures since', async (t) => {
  const metrics = new AgentMetrics();
  const status = new SyncStatus(metrics, pino({ level: 'silent' }));
  const { server, port } = await serveHealth(() => status.health, 60_000, { bindAddress: '127.0.0.1', port: 0 });
  t.teardown(() => server.close());
  const readyz = async () => {
    const res = await fetch(`http://127.0.0.1:${port}/readyz`);
    return { code: res.status, body: (await res.json()) as Record<string, unknown> };
  };

  let r = await readyz();
  t.equal(r.code, 503, 'not ready before the first full sync');
  t.equal(r.body['lastSuccessfulSync'], '', 'no sync yet');

  status.succeeded(report(true), capacity, 1);
  const at = new Date(status.health.lastSyncAt).toISOString();
  r = await readyz();
  t.equal(r.code, 200);
  t.equal(r.body['lastSuccessfulSync'], at, 'the time of the sync that succeeded');
  t.notOk('consecutiveSyncFailures' in r.body, 'no failures to report');

  const err = new ApplyError('slots', new Error('ENOMEM'));
  status.failed(err, { kind: 'partial', failures: 1, retryInMs: 1000, next: 'partial' });
  status.failed(err, { kind: 'partial', failures: 2, retryInMs: 2000, next: 'partial' });
  status.failed(err, { kind: 'full', failures: 3, retryInMs: 4000, next: 'full' });
  r = await readyz();
  t.equal(r.code, 200, 'still ready: the maps hold the last good state, partly updated');
  t.equal(r.body['lastSuccessfulSync'], at, 'a failed sync does not move it');
  t.equal(r.body['consecutiveSyncFailures'], 3);
  const text = await metrics.registry.getSingleMetricAsString('svcmap_sync_failures_total');
  t.match(text, /svcmap_sync_failures_total\{kind="partial"\} 2$/m);
  t.match(text, /svcmap_sync_failures_total\{kind="full"\} 1$/m);

  status.succeeded(report(false), capacity, 1);
  r = await readyz();
  t.notOk('consecutiveSyncFailures' in r.body, 'a success ends the run of failures');
  t.equal(r.body['lastSuccessfulSync'], new Date(status.health.lastSyncAt).toISOString());
});
