// Kubernetes Events, without an API server: the EventBook's de-duplication
// and rate limiting on an injected clock, the asynchronous sender over a
// fake sink (failures, ordering, never blocking the caller), and which
// problems and deferred frontends become which Events.
import { pino } from 'pino';
import t from 'tap';
import { AgentEvents, eventForProblem, eventsForDeferred } from '../../src/agent/events/agent-events.ts';
import { truncateNote } from '../../src/agent/events/k8s-sink.ts';
import {
  DEFAULT_LIMITS,
  type EventInput,
  EventBook,
  type EventLimits,
  type EventWrite,
  TokenBucket,
} from '../../src/agent/events/recorder.ts';
import { type EventSeries, type EventSink, EventSinkError, type NewEvent, EventRecorder } from '../../src/agent/events/sender.ts';
import { AgentMetrics } from '../../src/agent/http/metrics.ts';
import { ProblemReporter } from '../../src/agent/loops/problems-log.ts';
import { frontendConflict, problemAbout } from '../../src/model/problems.ts';
import type { Problem } from '../../src/model/types.ts';
import type { SyncReport } from '../../src/sync/syncer.ts';

const MIN = 60_000;
const T0 = 1_700_000_000_000;

const svc = (name: string, namespace = 'default') => ({ kind: 'Service', metadata: { namespace, name } });
const input = (
  name: string,
  note = 'spec.externalIPs[0]: must be an IP address',
  reason: EventInput['reason'] = 'InvalidObject',
): EventInput => ({
  regarding: { kind: 'Service', namespace: 'default', name },
  reason,
  note,
});
const limits = (over: Partial<EventLimits> = {}): EventLimits => ({ ...DEFAULT_LIMITS, ...over });

/** Takes every queued write and settles each as succeeded. */
function drain(book: EventBook, now: number): EventWrite[] {
  const out: EventWrite[] = [];
  for (let w = book.take(now); w; w = book.take(now)) {
    out.push(w);
    book.settle(w, { ok: true }, now);
  }
  return out;
}
const brief = (ws: EventWrite[]) => ws.map((w) => `${w.op} ${w.input.regarding.name} x${w.count}`);

t.test('TokenBucket: a burst, then one token per refill period', async (t) => {
  const b = new TokenBucket(3, 1000, 0);
  t.same([b.take(0), b.take(0), b.take(0), b.take(0)], [true, true, true, false], 'burst of 3');
  t.equal(b.take(999), false, 'not yet refilled');
  t.equal(b.take(1000), true, 'one token after one period');
  t.equal(b.take(1000), false, 'and only one');
  t.equal(b.isFull(1000 + 3000), true, 'full again after three periods');
  t.equal(b.take(-5), true, 'a clock going back neither refills nor breaks it');
});

t.test('EventBook: one Event per (object, reason, note); repeats extend its series', async (t) => {
  const book = new EventBook(limits(), T0);
  t.equal(book.observe(input('web'), T0), 'queued', 'the first observation queues a create');
  t.equal(book.observe(input('web'), T0 + 10), 'coalesced', 'a repeat while queued joins the queued write');
  const first = drain(book, T0 + 20);
  t.same(brief(first), ['create web x2'], 'one create, carrying both observations');
  t.equal(first[0]!.firstAt, T0, 'eventTime: the first observation');
  t.equal(first[0]!.lastAt, T0 + 10, 'lastObservedTime: the latest');
  t.match(first[0]!.name, /^web\.[0-9a-f]+$/, 'named like client-go: object name and a hex time');

  t.equal(book.observe(input('web'), T0 + MIN), 'queued', 'a repeat after the create queues a patch');
  const second = drain(book, T0 + MIN);
  t.same(brief(second), ['patch web x3'], 'the patch carries the whole count');
  t.equal(second[0]!.name, first[0]!.name, 'of the same Event');
  t.equal(second[0]!.lastAt, T0 + MIN, 'lastObservedTime moves on');

  book.observe(input('web', 'spec.ports[0].port: must be between 1 and 65535'), T0 + MIN);
  book.observe(input('web', undefined, 'FrontendConflict'), T0 + MIN);
  book.observe(input('api'), T0 + MIN);
  t.same(
    brief(drain(book, T0 + MIN)),
    ['create web x1', 'create web x1', 'create api x1'],
    'another note, another reason, another object: new Events',
  );
});

t.test('EventBook: a repeat after the series window starts a new Event', async (t) => {
  const book = new EventBook(limits({ seriesWindowMs: 30 * MIN }), T0);
  book.observe(input('web'), T0);
  const [created] = drain(book, T0);
  book.observe(input('web'), T0 + 30 * MIN);
  t.same(brief(drain(book, T0 + 30 * MIN)), ['patch web x2'], "at the window's edge: still the series");
  book.observe(input('web'), T0 + 60 * MIN + 1);
  const later = drain(book, T0 + 60 * MIN + 1);
  t.same(brief(later), ['create web x1'], 'past it: a new Event, counting from 1');
  t.not(later[0]!.name, created!.name, 'under a new name');
});

t.test('EventBook: per-object token bucket (burst 25, one per 5 min), count kept while limited', async (t) => {
  const book = new EventBook(limits({ perObjectBurst: 25, perObjectRefillMs: 5 * MIN, globalBurst: 1000 }), T0);
  const outcomes: string[] = [];
  let now = T0;
  for (let i = 0; i < 30; i++) {
    outcomes.push(book.observe(input('web'), now));
    drain(book, now);
    now += 1000;
  }
  t.same(outcomes.slice(0, 25), Array(25).fill('queued'), '25 writes in a burst');
  t.same(outcomes.slice(25), Array(5).fill('rate_limited'), 'then the object is rate limited');
  t.equal(book.observe(input('other'), now), 'queued', 'another object is not');
  drain(book, now);
  const refilled = T0 + 5 * MIN + 30_000;
  t.equal(book.observe(input('web'), refilled), 'queued', 'one more write after 5 minutes');
  t.same(brief(drain(book, refilled)), ['patch web x31'], 'carrying every observation, the limited ones too');
  t.equal(book.observe(input('web', 'another note'), refilled), 'rate_limited', 'the bucket is per object, across reasons and notes');
});

t.test('EventBook: the global bucket caps all objects together', async (t) => {
  const book = new EventBook(limits({ globalBurst: 5, globalRefillMs: 1000 }), T0);
  const outcomes = Array.from({ length: 7 }, (_, i) => book.observe(input(`svc-${i}`), T0));
  t.same(outcomes, ['queued', 'queued', 'queued', 'queued', 'queued', 'rate_limited', 'rate_limited'], 'five writes, then limited');
  t.equal(book.observe(input('svc-5'), T0 + 1000), 'queued', 'a second later one more; the limited series was kept');
  const writes = drain(book, T0 + 1000);
  t.same(brief(writes).at(-1), 'create svc-5 x2', 'created with both observations');
});

t.test('EventBook: a full queue drops without spending tokens', async (t) => {
  const book = new EventBook(limits({ queueSize: 2, perObjectBurst: 2, globalBurst: 100 }), T0);
  t.same([book.observe(input('a'), T0), book.observe(input('b'), T0), book.observe(input('c'), T0)], ['queued', 'queued', 'queue_full']);
  t.equal(book.queued, 2, 'the queue holds two');
  drain(book, T0);
  t.equal(book.observe(input('c'), T0), 'queued', 'c is queued once there is room');
  t.equal(book.observe(input('c', 'second note'), T0), 'queued', 'and its bucket still had both tokens: the full queue took none');
  t.same(brief(drain(book, T0)), ['create c x2', 'create c x1']);
});

t.test('EventBook: observations while a write is in flight are written after it', async (t) => {
  const book = new EventBook(limits(), T0);
  book.observe(input('web'), T0);
  const w = book.take(T0)!;
  t.equal(book.observe(input('web'), T0 + 5), 'coalesced', 'in flight: joins the series');
  t.equal(book.queued, 0, 'nothing queued meanwhile (the Event has no name yet)');
  t.equal(book.settle(w, { ok: true, name: 'web.server-named' }, T0 + 6), 'queued', 'once created, a patch is queued');
  const [patch] = drain(book, T0 + 6);
  t.same([patch?.op, patch?.name, patch?.count], ['patch', 'web.server-named', 2], 'patching the Event under the name the server returned');
});

t.test('EventBook: failures', async (t) => {
  const book = new EventBook(limits(), T0);
  book.observe(input('web'), T0);
  drain(book, T0);
  book.observe(input('web'), T0 + 1);
  const patch = book.take(T0 + 1)!;
  t.equal(book.settle(patch, { ok: false, gone: true }, T0 + 2), 'queued', 'a patch answered 404 (the Event expired) is re-created');
  const [again] = drain(book, T0 + 2);
  t.same([again?.op, again?.count], ['create', 2], 'as a create carrying the series so far');
  t.not(again?.name, patch.name, 'under a new name');

  book.observe(input('gone'), T0);
  const create = book.take(T0)!;
  t.equal(book.settle(create, { ok: false, gone: true }, T0), undefined, 'a create answered 404: the object is gone');
  t.same(brief((book.observe(input('gone'), T0), drain(book, T0))), ['create gone x1'], 'forgotten: a later observation starts afresh');

  book.observe(input('flaky'), T0);
  const failing = book.take(T0)!;
  t.equal(book.settle(failing, { ok: false, gone: false }, T0), undefined, 'any other failure is not retried by itself');
  t.equal(book.queued, 0, 'nothing queued');
  book.observe(input('flaky'), T0 + 1);
  t.same(brief(drain(book, T0 + 1)), ['create flaky x2'], 'the next observation retries, with the count kept');
});

t.test('EventBook: memory stays bounded', async (t) => {
  const book = new EventBook(limits({ maxTracked: 100, globalBurst: 1e9, seriesWindowMs: MIN }), T0);
  for (let i = 0; i < 1000; i++) {
    book.observe(input(`svc-${i}`), T0 + i);
    drain(book, T0 + i);
  }
  t.ok(book.tracked.series <= 100, `${book.tracked.series} series remembered`);
  t.ok(book.tracked.buckets <= 100, `${book.tracked.buckets} buckets remembered`);
  book.observe(input('svc-999'), T0 + 1000);
  t.same(brief(drain(book, T0 + 1000)), ['patch svc-999 x2'], 'the most recent series are the ones kept');
});

t.test('Event names: unique, and within the 253 characters of an object name', async (t) => {
  const book = new EventBook(limits({ globalBurst: 1e9 }), T0);
  const long = 'a'.repeat(253);
  const names = new Set<string>();
  for (let i = 0; i < 50; i++) book.observe(input(long, `note ${i}`), T0);
  for (const w of drain(book, T0)) {
    t.ok(w.name.length <= 253, 'short enough');
    names.add(w.name);
  }
  t.equal(names.size, 25, "every Event made in the same millisecond has its own name (25: the object's burst)");
});

// ---------------------------------------------------------------- the sender

interface Call {
  op: 'create' | 'patch';
  name: string;
  ev?: NewEvent;
  series?: EventSeries;
}

class FakeSink implements EventSink {
  readonly calls: Call[] = [];
  /** Each write answers with the next of these (default: success). */
  failures: Array<Error | undefined> = [];
  /** While set, writes wait for it. */
  gate: Promise<void> | undefined;
  async create(ev: NewEvent): Promise<string> {
    this.calls.push({ op: 'create', name: ev.name, ev });
    await this.gate;
    const f = this.failures.shift();
    if (f) throw f;
    return ev.name;
  }
  async patchSeries(_namespace: string, name: string, series: EventSeries): Promise<void> {
    this.calls.push({ op: 'patch', name, series });
    await this.gate;
    const f = this.failures.shift();
    if (f) throw f;
  }
}

function sender(sink: EventSink, over: Partial<EventLimits> = {}) {
  let now = T0;
  const logs: Array<{ level: number; msg: string }> = [];
  const log = pino({ level: 'debug' }, { write: (line: string) => logs.push(JSON.parse(line) as { level: number; msg: string }) });
  const dropped: string[] = [];
  const rec = new EventRecorder(new EventBook(limits(over), now), sink, { log, now: () => now, dropped: (r) => dropped.push(r) });
  return { rec, logs, dropped, tick: (ms: number) => (now += ms) };
}

t.test('EventRecorder: record() returns before any write; repeats patch the series', async (t) => {
  const sink = new FakeSink();
  const { rec, tick } = sender(sink);
  rec.record(input('web'));
  t.same(sink.calls, [], 'nothing written inside record(): the caller (a sync) is never held up');
  await rec.idle();
  t.same(
    sink.calls.map((c) => c.op),
    ['create'],
    'written asynchronously',
  );
  const ev = sink.calls[0]!.ev!;
  t.same(
    [ev.reason, ev.note, ev.eventTime, ev.series],
    ['InvalidObject', 'spec.externalIPs[0]: must be an IP address', T0, undefined],
    'the create',
  );
  tick(1000);
  rec.record(input('web'));
  await rec.idle();
  tick(1000);
  rec.record(input('web'));
  await rec.idle();
  t.same(
    sink.calls.slice(1).map((c) => [c.op, c.name, c.series]),
    [
      ['patch', ev.name, { count: 2, lastObservedTime: T0 + 1000 }],
      ['patch', ev.name, { count: 3, lastObservedTime: T0 + 2000 }],
    ],
    "each repeat patches the same Event's series",
  );
});

t.test('EventRecorder: a slow API server coalesces repeats instead of queueing them', async (t) => {
  const sink = new FakeSink();
  let open!: () => void;
  sink.gate = new Promise((r) => (open = r));
  const { rec } = sender(sink);
  rec.record(input('web'));
  await Promise.resolve();
  await Promise.resolve();
  for (let i = 0; i < 100; i++) rec.record(input('web'));
  sink.gate = undefined;
  open();
  await rec.idle();
  t.same(
    sink.calls.map((c) => [c.op, c.series?.count]),
    [
      ['create', undefined],
      ['patch', 101],
    ],
    'one create, then one patch with all 101',
  );
});

t.test('EventRecorder: API errors are logged once per streak, counted, never thrown', async (t) => {
  const sink = new FakeSink();
  const { rec, logs, dropped } = sender(sink);
  sink.failures = [
    new EventSinkError('creating Event: HTTP 403', 403),
    new EventSinkError('creating Event: HTTP 403', 403),
    new Error('socket hang up'),
  ];
  rec.record(input('a'));
  rec.record(input('b'));
  rec.record(input('c'));
  await rec.idle();
  const warnings = logs.filter((l) => l.level === 40);
  t.equal(warnings.length, 1, 'three failures, one warning');
  t.match(warnings[0]!.msg, /writing an Event failed/);
  t.same(dropped, ['api_error', 'api_error', 'api_error'], 'each counted');
  rec.record(input('d'));
  await rec.idle();
  t.ok(
    logs.some((l) => l.level === 30 && l.msg === 'writing Events works again'),
    'recovery is logged',
  );
  sink.failures = [new EventSinkError('HTTP 500', 500)];
  rec.record(input('e'));
  await rec.idle();
  t.equal(logs.filter((l) => l.level === 40).length, 2, 'a new streak is logged again');
});

t.test('EventRecorder: an expired Event is re-created, silently', async (t) => {
  const sink = new FakeSink();
  const { rec, logs, dropped } = sender(sink);
  rec.record(input('web'));
  await rec.idle();
  sink.failures = [new EventSinkError('patching Event: HTTP 404', 404)];
  rec.record(input('web'));
  await rec.idle();
  t.same(
    sink.calls.map((c) => c.op),
    ['create', 'patch', 'create'],
    'the 404 patch is followed by a create',
  );
  t.same(sink.calls[2]!.ev!.series?.count, 2, 'which carries the series');
  t.same(dropped, [], 'nothing dropped');
  t.equal(logs.filter((l) => l.level >= 40).length, 0, 'nothing warned');

  sink.failures = [new EventSinkError('reading Service default/gone: HTTP 404', 404)];
  rec.record(input('gone'));
  await rec.idle();
  t.same(
    [sink.calls.length, dropped, logs.filter((l) => l.level >= 40).length],
    [4, [], 0],
    'a create answered 404 (the Service was deleted meanwhile): not an API error either',
  );
});

t.test('EventRecorder: drops are counted; a full queue is warned about once', async (t) => {
  const sink = new FakeSink();
  let open!: () => void;
  sink.gate = new Promise((r) => (open = r));
  const { rec, logs, dropped } = sender(sink, { queueSize: 2, perObjectBurst: 1 });
  rec.record(input('a')); // taken by the sender, waits at the gate
  await Promise.resolve();
  await Promise.resolve();
  rec.record(input('b')); // queued
  rec.record(input('a', 'other note')); // a's bucket is empty: rate limited
  rec.record(input('c')); // queued
  rec.record(input('d')); // queue full
  rec.record(input('e')); // queue full
  sink.gate = undefined;
  open();
  await rec.idle();
  t.same(dropped, ['rate_limited', 'queue_full', 'queue_full'], 'each drop counted by reason');
  t.same(
    sink.calls.map((c) => c.name.split('.')[0]),
    ['a', 'b', 'c'],
    'what was queued is written, in order',
  );
  t.equal(logs.filter((l) => l.level === 40 && /queue_full/.test(l.msg)).length, 1, 'the full queue warned once');
  t.equal(logs.filter((l) => l.level === 40 && /rate_limited/.test(l.msg)).length, 0, 'rate limiting is not a warning');
  rec.stop();
  rec.record(input('z'));
  await rec.idle();
  t.notOk(
    sink.calls.some((c) => c.name.startsWith('z.')),
    'nothing is written after stop()',
  );
});

// ---------------------------------------------------------------- what becomes an Event

t.test('eventForProblem: reasons and notes', async (t) => {
  const invalid: Problem = {
    ...problemAbout(svc('web'), 'error', 'spec.externalIPs[0]', 'must be an IP address, got "10.1.2.300"'),
    source: 'api',
  };
  t.same(
    eventForProblem(invalid),
    {
      regarding: { kind: 'Service', namespace: 'default', name: 'web' },
      reason: 'InvalidObject',
      note: 'spec.externalIPs[0]: must be an IP address, got "10.1.2.300" (svcmap ignores this Service until it is valid)',
    },
    'an invalid Service: InvalidObject, the note names the field',
  );
  const slice = problemAbout(
    { kind: 'EndpointSlice', metadata: { namespace: 'ns', name: 'web-abc' } },
    'error',
    'endpoints[0].addresses[0]',
    'must be an IPv4 address',
  );
  t.match(
    eventForProblem(slice),
    { regarding: { kind: 'EndpointSlice', namespace: 'ns', name: 'web-abc' }, reason: 'InvalidObject' },
    'an invalid EndpointSlice: about the slice',
  );
  const conflict = frontendConflict(
    svc('zz'),
    'spec.externalIPs[0]',
    'frontend 1.2.3.4:80/TCP (ExternalIP) is already used by Service default/aa; this frontend is skipped',
  );
  t.same(eventForProblem(conflict)?.reason, 'FrontendConflict', 'a conflict');
  t.same(eventForProblem(conflict)?.note, conflict.message, "its note is the model's message");
  const annotation = problemAbout(
    svc('web'),
    'warning',
    'metadata.annotations["svcmap.io/lb-algorithm"]',
    'unknown value "fastest"; using random',
  );
  t.same(eventForProblem(annotation)?.reason, 'UnknownAnnotationValue', 'a problem with an annotation value, even a warning');
  t.equal(
    eventForProblem(problemAbout(svc('web'), 'warning', 'spec.ports[0].protocol', 'SCTP is not supported; port skipped')),
    undefined,
    'other warnings stay in the log',
  );
  t.equal(
    eventForProblem(problemAbout({ kind: 'Node', metadata: { name: 'n1' } }, 'error', 'status.addresses[0].address', 'bad')),
    undefined,
    'not about a Node',
  );
  t.equal(eventForProblem({ ...invalid, name: '' }), undefined, 'not about an object without a name');
});

t.test('eventsForDeferred: one MapFull per Service and note', async (t) => {
  const deferred: SyncReport['deferred'] = [
    { id: '10.96.0.10:53/17/0', label: 'kube-system/dns:dns', owner: 'kube-system/dns', reason: 'the services map is full (4096 entries)' },
    { id: '10.96.0.10:53/17/1', label: 'kube-system/dns:dns', owner: 'kube-system/dns', reason: 'the services map is full (4096 entries)' },
    { id: '10.96.0.11:80/6/0', label: 'web/api', owner: 'web/api', reason: 'the backends map is full (65536 entries)' },
  ];
  const events = eventsForDeferred(deferred);
  t.same(
    events.map((e) => [e.regarding.namespace, e.regarding.name, e.reason]),
    [
      ['kube-system', 'dns', 'MapFull'],
      ['web', 'api', 'MapFull'],
    ],
  );
  t.match(
    events[0]!.note,
    /kube-system\/dns:dns .*services map is full \(4096 entries\).*--max-services/,
    'the note says which map and what to do',
  );
});

t.test('the wiring: every report of a problem is an observation; deferred frontends too', async (t) => {
  const sink = new FakeSink();
  const metrics = new AgentMetrics();
  const log = pino({ level: 'silent' });
  const events = new AgentEvents(sink, log, metrics, { now: () => T0 });
  const reporter = new ProblemReporter(log, () => {}, events.problems);
  const bad = problemAbout(svc('bad'), 'error', 'spec.clusterIP', 'is empty (no address allocated); Service not proxied');
  reporter.reportObject('Service default/bad', [bad]);
  await events.recorder.idle();
  reporter.reportObject('Service default/bad', [bad]); // the object changed, and is still broken
  await events.recorder.idle();
  reporter.reportObject('Service default/bad', []);
  await events.recorder.idle();
  t.same(
    sink.calls.map((c) => `${c.op} ${c.ev?.reason ?? ''}${c.series?.count ?? ''}`),
    ['create InvalidObject', 'patch 2'],
    'logged once, but both reports observed; fixed: nothing more',
  );

  const status = events.syncStatus(metrics, log);
  const report = {
    full: true,
    changed: 0,
    ops: {},
    durationMs: 1,
    entries: { services: 0, backends: 0, revNat: 0, srcRanges: 0 },
    deferred: [{ id: 'x', label: 'default/big:http', owner: 'default/big', reason: 'the backends map is full (4 entries)' }],
  } as unknown as SyncReport;
  status.succeeded(report, { services: 4, backends: 4, revNat: 4, srcRanges: 4 }, 0);
  await events.recorder.idle();
  t.match(sink.calls.at(-1)?.ev, { reason: 'MapFull', regarding: { name: 'big' } }, 'a deferred frontend: MapFull on its Service');
  t.match(
    await metrics.registry.getSingleMetricAsString('svcmap_sync_errors_total'),
    /kind="map_full"} 1/,
    'and the SyncStatus still does its own job',
  );
  t.match(
    await metrics.registry.getSingleMetricAsString('svcmap_events_dropped_total'),
    /reason="queue_full"} 0/,
    'svcmap_events_dropped_total is exported, from 0',
  );
});

t.test('truncateNote: at most 1 KiB, cut at a character', async (t) => {
  t.equal(truncateNote('short'), 'short');
  const cut = truncateNote('é'.repeat(600));
  t.ok(Buffer.byteLength(cut) <= 1024, `${Buffer.byteLength(cut)} bytes`);
  t.ok(cut.endsWith('…') && !cut.includes('\uFFFD'), 'marked, no broken character');
});
