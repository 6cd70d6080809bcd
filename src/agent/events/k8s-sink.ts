// Events to the API server: events.k8s.io/v1 through client-node. Loaded only
// with the Kubernetes source (agent.ts imports it dynamically), as the
// client is big. The Event names its object with the object's uid, read
// from the API server when the Event is created (the model keeps no uids):
// `kubectl describe` finds Events by uid, and one without it would not show.
import {
  ApiException, CoreV1Api, DiscoveryV1Api, EventsV1Api, type EventsV1Event, type KubeConfig,
  PatchStrategy, V1MicroTime, setHeaderOptions,
} from '@kubernetes/client-node';
import * as z from 'zod';
import type { Logger } from '../log.ts';
import type { AgentMetrics } from '../metrics.ts';
import { AgentEvents, type AgentEventsOptions } from './agent-events.ts';
import type { Regarding } from './recorder.ts';
import { type EventSeries, type EventSink, EventSinkError, type NewEvent } from './sender.ts';

/** events.k8s.io/v1 reportingController: who writes the Events (a domain-prefixed path, as the API requires). */
export const REPORTING_CONTROLLER = 'svcmap.io/agent';
/** What svcmap was doing when it met the problem. */
export const ACTION = 'Program';
/** The API server refuses notes over 1 KiB. */
const NOTE_MAX_BYTES = 1024;
/** ...and reportingInstance over 128 characters. */
const INSTANCE_MAX = 128;

const API_VERSION: Record<Regarding['kind'], string> = { Service: 'v1', EndpointSlice: 'discovery.k8s.io/v1' };

// What the API server's answers must hold for svcmap to go on.
const Created = z.object({ metadata: z.object({ name: z.string().min(1) }) });
const HasUid = z.object({ metadata: z.object({ uid: z.string().min(1) }) });
const HttpFailure = z.object({ code: z.int() });

/** events.k8s.io MicroTime: RFC 3339 with microseconds (V1MicroTime serializes so). */
export function microTime(ms: number): V1MicroTime {
  return new V1MicroTime(ms);
}

/** Cuts a note to the API's byte limit at a character boundary, marking the cut. */
export function truncateNote(note: string, maxBytes = NOTE_MAX_BYTES): string {
  if (Buffer.byteLength(note) <= maxBytes) return note;
  let out = '';
  let bytes = Buffer.byteLength('…');
  for (const ch of note) {
    const n = Buffer.byteLength(ch);
    if (bytes + n > maxBytes) break;
    out += ch;
    bytes += n;
  }
  return `${out}…`;
}

async function call<T>(what: string, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    const http = err instanceof ApiException ? HttpFailure.safeParse(err) : undefined;
    const status = http?.success ? http.data.code : undefined;
    throw new EventSinkError(`${what}: ${status === undefined ? String((err as Error)?.message ?? err) : `HTTP ${status}`}`, status, { cause: err });
  }
}

function parsed<S extends z.ZodType>(what: string, schema: S, value: unknown): z.output<S> {
  const r = schema.safeParse(value);
  if (!r.success) throw new EventSinkError(`${what}: unexpected answer (${r.error.issues[0]?.message ?? 'invalid'})`, undefined);
  return r.data;
}

export class KubernetesEventSink implements EventSink {
  readonly #events: EventsV1Api;
  readonly #core: CoreV1Api;
  readonly #discovery: DiscoveryV1Api;
  readonly #instance: string;

  /** reportingInstance: this node's name, so each agent's Events are told apart. */
  constructor(kc: KubeConfig, reportingInstance: string) {
    this.#events = kc.makeApiClient(EventsV1Api);
    this.#core = kc.makeApiClient(CoreV1Api);
    this.#discovery = kc.makeApiClient(DiscoveryV1Api);
    this.#instance = reportingInstance.slice(0, INSTANCE_MAX);
  }

  async create(ev: NewEvent): Promise<string> {
    const { kind, namespace, name } = ev.regarding;
    const object = kind === 'Service'
      ? await call(`reading Service ${namespace}/${name}`, () => this.#core.readNamespacedService({ namespace, name }))
      : await call(`reading EndpointSlice ${namespace}/${name}`, () => this.#discovery.readNamespacedEndpointSlice({ namespace, name }));
    const { uid } = parsed(`reading ${kind} ${namespace}/${name}`, HasUid, object).metadata;
    const body: EventsV1Event = {
      apiVersion: 'events.k8s.io/v1',
      kind: 'Event',
      metadata: { name: ev.name, namespace },
      eventTime: microTime(ev.eventTime),
      reportingController: REPORTING_CONTROLLER,
      reportingInstance: this.#instance,
      action: ACTION,
      reason: ev.reason,
      note: truncateNote(ev.note),
      type: 'Warning',
      regarding: { apiVersion: API_VERSION[kind], kind, namespace, name, uid },
      ...(ev.series ? { series: { count: ev.series.count, lastObservedTime: microTime(ev.series.lastObservedTime) } } : {}),
    };
    const created = await call(`creating Event ${namespace}/${ev.name}`, () => this.#events.createNamespacedEvent({ namespace, body }));
    return parsed(`creating Event ${namespace}/${ev.name}`, Created, created).metadata.name;
  }

  async patchSeries(namespace: string, name: string, series: EventSeries): Promise<void> {
    // JSON Patch "add" sets /series whether or not the Event has one yet.
    const body = [{ op: 'add', path: '/series', value: { count: series.count, lastObservedTime: microTime(series.lastObservedTime).toISOString() } }];
    await call(`patching Event ${namespace}/${name}`, () =>
      this.#events.patchNamespacedEvent({ namespace, name, body }, setHeaderOptions('Content-Type', PatchStrategy.JsonPatch)));
  }
}

/** The agent's Events in the Kubernetes source mode, written by this node's agent. */
export function startKubernetesEvents(kc: KubeConfig, nodeName: string, log: Logger, metrics: AgentMetrics, opts: AgentEventsOptions = {}): AgentEvents {
  return new AgentEvents(new KubernetesEventSink(kc, nodeName), log, metrics, opts);
}
