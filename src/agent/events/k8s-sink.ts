// Events to the API server: events.k8s.io/v1, written as plain requests
// authenticated by the KubeConfig (the informers' own way, request.ts), not
// through client-node's generated EventsV1Api, whose import loads every
// generated API and model (see client-node.ts). Loaded only with the
// Kubernetes source (agent.ts imports it dynamically). The Event names its
// object with the object's uid, read from the API server when the Event is
// created (the model keeps no uids): `kubectl describe` finds Events by uid,
// and one without it would not show.
import { V1MicroTime } from '@kubernetes/client-node/dist/types.js';
import * as z from 'zod';
import type { KubeConfig } from '../../sources/kubernetes/client-node.ts';
import { apiRequest } from '../../sources/kubernetes/request.ts';
import type { Logger } from '../log.ts';
import type { AgentMetrics } from '../http/metrics.ts';
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

const API_VERSION: Record<Regarding['kind'], string> = { Service: 'v1', EndpointSlice: 'discovery.k8s.io/v1', Pod: 'v1' };
const PATH: Record<Regarding['kind'], (namespace: string, name: string) => string> = {
  Service: (ns, name) => `/api/v1/namespaces/${encodeURIComponent(ns)}/services/${encodeURIComponent(name)}`,
  EndpointSlice: (ns, name) => `/apis/discovery.k8s.io/v1/namespaces/${encodeURIComponent(ns)}/endpointslices/${encodeURIComponent(name)}`,
  Pod: (ns, name) => `/api/v1/namespaces/${encodeURIComponent(ns)}/pods/${encodeURIComponent(name)}`,
};
const eventsPath = (ns: string) => `/apis/events.k8s.io/v1/namespaces/${encodeURIComponent(ns)}/events`;

// What the API server's answers must hold for svcmap to go on.
const Created = z.object({ metadata: z.object({ name: z.string().min(1) }) });
const HasUid = z.object({ metadata: z.object({ uid: z.string().min(1) }) });

/** events.k8s.io MicroTime: RFC 3339 with microseconds (client-node's V1MicroTime). */
export function microTime(ms: number): string {
  return new V1MicroTime(ms).toISOString();
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

/** One request; a failure to connect or an answer other than 2xx is an EventSinkError (with the status when there is one). */
async function call(what: string, kc: KubeConfig, r: Parameters<typeof apiRequest>[1]): Promise<unknown> {
  let status: number;
  let text: string;
  try {
    const res = await apiRequest(kc, r);
    status = res.status;
    text = await res.text();
  } catch (err) {
    throw new EventSinkError(`${what}: ${String((err as Error)?.message ?? err)}`, undefined, { cause: err });
  }
  if (status < 200 || status > 299) throw new EventSinkError(`${what}: HTTP ${status}`, status, { cause: new Error(text.slice(0, 300)) });
  try {
    return JSON.parse(text) as unknown;
  } catch (err) {
    throw new EventSinkError(`${what}: the answer is not JSON`, undefined, { cause: err });
  }
}

function parsed<S extends z.ZodType>(what: string, schema: S, value: unknown): z.output<S> {
  const r = schema.safeParse(value);
  if (!r.success) throw new EventSinkError(`${what}: unexpected answer (${r.error.issues[0]?.message ?? 'invalid'})`, undefined);
  return r.data;
}

export class KubernetesEventSink implements EventSink {
  readonly #kc: KubeConfig;
  readonly #instance: string;

  /** reportingInstance: this node's name, so each agent's Events are told apart. */
  constructor(kc: KubeConfig, reportingInstance: string) {
    this.#kc = kc;
    this.#instance = reportingInstance.slice(0, INSTANCE_MAX);
  }

  async create(ev: NewEvent): Promise<string> {
    const { kind, namespace, name } = ev.regarding;
    const reading = `reading ${kind} ${namespace}/${name}`;
    const object = await call(reading, this.#kc, { method: 'GET', url: PATH[kind](namespace, name) });
    const { uid } = parsed(reading, HasUid, object).metadata;
    const body = {
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
    const creating = `creating Event ${namespace}/${ev.name}`;
    const created = await call(creating, this.#kc, { method: 'POST', url: eventsPath(namespace), body });
    return parsed(creating, Created, created).metadata.name;
  }

  async patchSeries(namespace: string, name: string, series: EventSeries): Promise<void> {
    // JSON Patch "add" sets /series whether or not the Event has one yet.
    const body = [{ op: 'add', path: '/series', value: { count: series.count, lastObservedTime: microTime(series.lastObservedTime) } }];
    await call(`patching Event ${namespace}/${name}`, this.#kc, {
      method: 'PATCH',
      url: `${eventsPath(namespace)}/${encodeURIComponent(name)}`,
      body,
      contentType: 'application/json-patch+json',
    });
  }
}

/** The agent's Events in the Kubernetes source mode, written by this node's agent. */
export function startKubernetesEvents(
  kc: KubeConfig,
  nodeName: string,
  log: Logger,
  metrics: AgentMetrics,
  opts: AgentEventsOptions = {},
): AgentEvents {
  return new AgentEvents(new KubernetesEventSink(kc, nodeName), log, metrics, opts);
}
