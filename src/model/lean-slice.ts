// A lean path for the common EndpointSlice: addressType IPv4, every field
// the model reads present and plainly of its type (what the API server, which
// validated the object already, sends). It checks those fields by the same
// rules as the zod schema (schemas.ts) and builds the same output, without
// zod's per-field allocations; a slice it is not sure of in any way (a null
// where zod would keep one, an unknown protocol, a bad address, an IPv6 or
// FQDN slice) gets undefined, and goes through zod, which also reports every
// error. test/model/lean-slice.test.ts holds the two equal.
import { canonicalIpv4 } from '../util/ipv4.ts';
import { isPortNumber, isRecord, leanList as list, leanMeta, leanPortName, PROTOCOLS } from './lean.ts';
import { triggerTime } from './names.ts';
import type { Endpoint, EndpointPort, EndpointSlice } from './schemas.ts';

type Rec = Record<string, unknown>;

function port(raw: unknown): EndpointPort | undefined {
  if (!isRecord(raw)) return undefined;
  const { name, port, protocol } = raw;
  if (name !== undefined && leanPortName(name) === undefined) return undefined;
  if (port !== undefined && !isPortNumber(port)) return undefined;
  if (protocol !== undefined && (typeof protocol !== 'string' || !PROTOCOLS.has(protocol))) return undefined;
  // As zod gives it: no port key when the port is not set (the type says the key is there, undefined).
  const p = (protocol ?? 'TCP') as EndpointPort['protocol'];
  return (port === undefined ? { name: name ?? '', protocol: p } : { name: name ?? '', port, protocol: p }) as EndpointPort;
}

function condition(c: Rec, name: string): boolean | undefined | null {
  const v = c[name];
  return v === undefined || typeof v === 'boolean' ? v : null;
}

/** hints.forZones / forNodes as names: undefined when absent or empty, null when not plainly a list of {name: string}. */
function hintNames(raw: unknown): string[] | undefined | null {
  if (raw === undefined) return undefined;
  if (!Array.isArray(raw)) return null;
  const names: string[] = [];
  for (const h of raw) {
    if (!isRecord(h) || typeof h.name !== 'string') return null;
    names.push(h.name);
  }
  return names.length ? names : undefined;
}

function endpoint(raw: unknown): Endpoint | undefined {
  if (!isRecord(raw)) return undefined;
  const { addresses, conditions: c, nodeName, zone, hints } = raw;
  if (!Array.isArray(addresses) || addresses.length === 0) return undefined;
  const ips = list(addresses, (a) => (typeof a === 'string' ? canonicalIpv4(a) : undefined));
  if (ips === undefined) return undefined;
  let ready = true;
  let serving = true;
  let terminating = false;
  if (c !== undefined) {
    if (!isRecord(c)) return undefined;
    const r = condition(c, 'ready'),
      s = condition(c, 'serving'),
      t = condition(c, 'terminating');
    if (r === null || s === null || t === null) return undefined;
    ready = r ?? true;
    serving = s ?? ready;
    terminating = t ?? false;
  }
  if ((nodeName !== undefined && typeof nodeName !== 'string') || (zone !== undefined && typeof zone !== 'string')) return undefined;
  const out = { addresses: ips, conditions: { ready, serving, terminating } } as Endpoint;
  if (nodeName !== undefined) out.nodeName = nodeName;
  if (zone !== undefined) out.zone = zone;
  // As zod gives it: hints always an object, each list undefined when empty or absent.
  let zones: string[] | undefined, nodes: string[] | undefined;
  if (hints !== undefined) {
    if (!isRecord(hints)) return undefined;
    const z = hintNames(hints.forZones),
      n = hintNames(hints.forNodes);
    if (z === null || n === null) return undefined;
    [zones, nodes] = [z, n];
  }
  out.hints = { zones, nodes };
  return out;
}

/** The validated slice, as the zod schema would give it, or undefined: validate it with zod. */
export function leanIpv4Slice(raw: unknown): EndpointSlice | undefined {
  if (!isRecord(raw) || raw.apiVersion !== 'discovery.k8s.io/v1' || raw.kind !== 'EndpointSlice' || raw.addressType !== 'IPv4')
    return undefined;
  const m = raw.metadata;
  if (!isRecord(m)) return undefined;
  const { annotations } = m;
  // An absent or null namespace or labels: 'default' and {} (manifests often leave them out).
  const meta = leanMeta(m);
  if (meta === undefined) return undefined;
  const { name, namespace, labels: ownLabels } = meta;
  if (annotations !== undefined && !isRecord(annotations)) return undefined;
  const ports = list(raw.ports, port);
  const endpoints = list(raw.endpoints, endpoint);
  if (!ports || !endpoints) return undefined;
  const at = triggerTime(annotations);
  const metadata =
    at === undefined ? { name, namespace, labels: ownLabels } : { name, namespace, labels: ownLabels, lastChangeTriggerTime: at };
  return { apiVersion: 'discovery.k8s.io/v1', kind: 'EndpointSlice', metadata, ports, addressType: 'IPv4', endpoints };
}
