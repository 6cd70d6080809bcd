// What the agent reports as Kubernetes Events, and where it hooks in: the
// problems the model finds (invalid objects, frontend conflicts, annotation
// values it does not know) each time it evaluates an object, and the
// frontends a sync defers because a map is full. Only the Kubernetes source
// has these (the file source has no API server and only logs). Events are
// type Warning, action Program, about the Service, EndpointSlice or Pod itself.
import { Counter, type Registry } from 'prom-client';
import type { Problem } from '../../model/types.ts';
import type { SyncReport } from '../../sync/syncer.ts';
import type { Component } from '../components.ts';
import type { Logger } from '../log.ts';
import type { AgentMetrics } from '../http/metrics.ts';
import { SyncStatus } from '../loops/sync-status.ts';
import { DEFAULT_LIMITS, type EventInput, EventBook, type EventLimits, type EventReason } from './recorder.ts';
import { type DropReason, type EventSink, EventRecorder } from './sender.ts';

/** A problem with an annotation's value (e.g. an unknown load-balancing algorithm) is reported under its own reason. */
const ANNOTATION_PATH = /^metadata\.annotations(\[|\.|$)/;

/**
 * The Event for one problem, or undefined for those not worth one: warnings
 * about a transient state (an EndpointSlice that arrives before its Service)
 * or about a part svcmap deliberately leaves out (IPv6, SCTP) stay in the log.
 */
export function eventForProblem(p: Problem): EventInput | undefined {
  if (p.kind !== 'Service' && p.kind !== 'EndpointSlice' && p.kind !== 'Pod') return undefined;
  if (p.namespace === '' || p.name === '') return undefined; // nothing an Event could refer to
  let reason: EventReason;
  let note = p.message;
  if (p.reason) reason = p.reason;
  else if (ANNOTATION_PATH.test(p.path)) reason = 'UnknownAnnotationValue';
  // A Pod's warnings are its hostPorts left out (inside the NodePort range, SCTP), as Cilium reports them.
  else if (p.kind === 'Pod' && p.severity === 'warning') reason = 'HostPortIgnored';
  else if (p.severity !== 'error') return undefined;
  else if (p.conflict) reason = 'FrontendConflict';
  else {
    reason = 'InvalidObject';
    note = `${p.message} (svcmap ignores this ${p.kind} until it is valid)`;
  }
  return { regarding: { kind: p.kind, namespace: p.namespace, name: p.name }, reason, note };
}

/** One MapFull Event per Service (the frontend's owner, "namespace/name") and distinct note among the frontends a sync deferred. */
export function eventsForDeferred(deferred: SyncReport['deferred']): EventInput[] {
  const out = new Map<string, EventInput>();
  for (const d of deferred) {
    const [namespace, name, ...rest] = d.owner.split('/');
    // A Pod's hostPorts ("Pod namespace/name") are reported about the Pod.
    const pod = namespace?.startsWith('Pod ');
    if (!namespace || !name || rest.length) continue;
    const note = `frontends of ${d.label} are not programmed: ${d.reason}; raise the map size (--max-services / --max-backends)`;
    const regarding = pod ? { kind: 'Pod' as const, namespace: namespace.slice(4), name } : { kind: 'Service' as const, namespace, name };
    out.set(`${d.owner}\u0000${note}`, { regarding, reason: 'MapFull', note });
  }
  return [...out.values()];
}

const DROP_REASONS: readonly DropReason[] = ['rate_limited', 'queue_full', 'api_error'];

export interface AgentEventsOptions {
  limits?: EventLimits;
  /** Wall clock, ms since the epoch. */
  now?: () => number;
}

/** svcmap_events_dropped_total, registered in `registry` (every reason at 0). */
export function eventsDroppedCounter(registry: Registry): Counter<'reason'> {
  const c = new Counter({
    name: 'svcmap_events_dropped_total',
    help: 'Kubernetes Events not written, by reason: rate_limited (per object or agent), queue_full, api_error.',
    labelNames: ['reason'],
    registers: [registry],
  });
  for (const reason of DROP_REASONS) c.inc({ reason }, 0);
  return c;
}

export class AgentEvents implements Component {
  readonly name = 'events';
  readonly recorder: EventRecorder;

  constructor(sink: EventSink, log: Logger, metrics: AgentMetrics, opts: AgentEventsOptions = {}) {
    const now = opts.now ?? Date.now;
    const dropped = eventsDroppedCounter(metrics.registry);
    this.recorder = new EventRecorder(new EventBook(opts.limits ?? DEFAULT_LIMITS, now()), sink, {
      log,
      now,
      dropped: (reason) => dropped.inc({ reason }),
    });
  }

  /** The ProblemReporter's hook: called with an object's problems each time the model evaluates it. */
  readonly problems = (problems: readonly Problem[]): void => {
    for (const p of problems) {
      const e = eventForProblem(p);
      if (e) this.recorder.record(e);
    }
  };

  /** A SyncStatus that also reports the frontends each sync defers for lack of map space. */
  syncStatus(...ctor: ConstructorParameters<typeof SyncStatus>): SyncStatus {
    const record = (deferred: SyncReport['deferred']) => {
      for (const e of eventsForDeferred(deferred)) this.recorder.record(e);
    };
    return new (class extends SyncStatus {
      override succeeded(...args: Parameters<SyncStatus['succeeded']>): void {
        super.succeeded(...args);
        record(args[0].deferred);
      }
    })(...ctor);
  }

  /** Nothing to do: the recorder writes an Event once one is recorded. */
  start(): void {}

  stop(): void {
    this.recorder.stop();
  }
}
