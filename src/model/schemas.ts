// zod schemas for the Kubernetes objects svcmap consumes, validated once at the
// boundary (file source, API source) so the model can trust its input.
//
// Lenient on fields we do not read (they pass and are dropped from the output,
// so managedFields and friends cost no memory), strict on the fields we do read.
// The output is normalised: Kubernetes defaults are filled in (type ClusterIP,
// protocol TCP, policies Cluster, ...), Go's `null` for empty lists becomes [],
// and EndpointSlice conditions are resolved to plain booleans with the API's
// nil semantics, so the model never has to think about absent values.

import * as z from 'zod';
import { canonicalCidrv4, canonicalIpv4 } from '../util/ipv4.ts';
import { canonicalCidrv6, canonicalIpv6 } from '../util/ipv6.ts';
import { METADATA_KEYS } from './metadata-keys.ts';
import type { Problem } from './types.ts';
import { DNS_LABEL, DNS_SUBDOMAIN, PORT_NAME, triggerTime } from './names.ts';
import { familyOf } from '../util/family.ts';

export const DEFAULT_AFFINITY_TIMEOUT_SECONDS = 10800;

// ---------------------------------------------------------------- building blocks

/** Absent or null (Go's nil) becomes `fallback`. */
function orDefault<S extends z.ZodType, D extends z.output<S>>(schema: S, fallback: D) {
  return schema.nullish().transform((v): z.output<S> => v ?? fallback);
}

const objectName = z
  .string()
  .min(1, { error: 'must not be empty' })
  .max(253, { error: 'must be at most 253 characters' })
  .regex(DNS_SUBDOMAIN, { error: 'must be a lowercase DNS name (a-z, 0-9, "-", ".")' });

const namespaceName = z
  .string()
  .min(1, { error: 'must not be empty' })
  .max(63, { error: 'must be at most 63 characters' })
  .regex(DNS_LABEL, { error: 'must be a lowercase DNS label (a-z, 0-9, "-")' });

/** Service and EndpointSlice port names: DNS labels, '' for a single unnamed port. */
const portName = z
  .string()
  .max(63, { error: 'must be at most 63 characters' })
  .regex(PORT_NAME, { error: 'must be a lowercase DNS label (a-z, 0-9, "-")' });

const labels = orDefault(z.record(z.string(), z.string({ error: 'label values must be strings' })), {});

const portNumber = z
  .int({ error: 'must be an integer' })
  .min(1, { error: 'must be between 1 and 65535' })
  .max(65535, { error: 'must be between 1 and 65535' });

/** The enum fields' values, one list each for the zod schemas and the lean paths (lean.ts, lean-service.ts). */
export const PROTOCOL_NAMES = ['TCP', 'UDP', 'SCTP'] as const;
export const SERVICE_ENUMS = {
  type: ['ClusterIP', 'NodePort', 'LoadBalancer', 'ExternalName'],
  ipFamily: ['IPv4', 'IPv6'],
  ipFamilyPolicy: ['SingleStack', 'PreferDualStack', 'RequireDualStack'],
  // "Global" is the pre-1.14 spelling of Cluster; the API server still accepts it.
  externalTrafficPolicy: ['Cluster', 'Local', 'Global'],
  internalTrafficPolicy: ['Cluster', 'Local'],
  sessionAffinity: ['None', 'ClientIP'],
} as const;

const protocol = orDefault(z.enum(PROTOCOL_NAMES, { error: 'must be one of TCP, UDP, SCTP' }), 'TCP');

/**
 * Address text read the way kube-proxy reads it (IPv4: ParseIPSloppy, leading
 * zeros are decimal, src/util/ipv4.ts; IPv6: src/util/ipv6.ts) and made
 * canonical, so that "010.96.0.1" and "10.96.0.1" (or "FD00:0::1" and
 * "fd00::1") are one address everywhere after validation.
 */
function canonicalized(canonical: (text: string) => string | undefined, message: string) {
  return z.string({ error: message }).transform((text, ctx) => {
    const out = canonical(text);
    if (out === undefined) {
      ctx.addIssue({ code: 'custom', message, input: text });
      return z.NEVER;
    }
    return out;
  });
}

const ipv4 = canonicalized(canonicalIpv4, 'must be an IPv4 address');
// IPv6 in any valid spelling, kept in the canonical form the API server
// writes (src/util/ipv6.ts); IPv4-mapped addresses are IPv4 to Kubernetes.
const ipv6 = canonicalized(canonicalIpv6, 'must be an IPv6 address');
const ipAddress = z.union([ipv4, ipv6], { error: 'must be an IP address' });

/** kube-proxy trims blanks around source ranges (ParseCIDRSloppy), so we do too. */
const cidr = z
  .string()
  .trim()
  .pipe(
    z.union([canonicalized(canonicalCidrv4, 'must be an IPv4 CIDR'), canonicalized(canonicalCidrv6, 'must be an IPv6 CIDR')], {
      error: 'must be a CIDR such as 10.0.0.0/8 or fd00::/64',
    }),
  );

/** "None" marks a headless service; "" a service whose address is not allocated. */
const clusterIP = z.union([z.literal('None'), z.literal(''), ipv4, ipv6], {
  error: 'must be an IP address, "None" or ""',
});

const namespacedMeta = z.object({
  name: objectName,
  // Manifests applied with kubectl land in "default" when they do not say.
  namespace: orDefault(namespaceName, 'default'),
  labels,
});

const clusterMeta = z.object({ name: objectName, labels });

export { LAST_CHANGE_TRIGGER_TIME } from './names.ts';

// Only the trigger time is read from annotations (for the network programming
// latency metric); an unreadable value is ignored, never an error.
const sliceMeta = namespacedMeta
  .extend({
    annotations: z.record(z.string(), z.unknown()).nullish(),
  })
  .transform(({ annotations, ...meta }) => {
    const at = triggerTime(annotations);
    return at === undefined ? meta : { ...meta, lastChangeTriggerTime: at };
  });

// ---------------------------------------------------------------- Service (v1)

const servicePort = z.object({
  name: orDefault(portName, ''),
  protocol,
  port: portNumber,
  targetPort: z.union([portNumber, z.string().min(1)], { error: 'must be a port number or a port name' }).nullish(),
  nodePort: portNumber.nullish(),
});

const serviceSpec = z
  .object({
    type: orDefault(
      z.enum(SERVICE_ENUMS.type, {
        error: 'must be one of ClusterIP, NodePort, LoadBalancer, ExternalName',
      }),
      'ClusterIP',
    ),
    clusterIP: orDefault(clusterIP, ''),
    clusterIPs: orDefault(z.array(clusterIP), []),
    ipFamilies: orDefault(z.array(z.enum(SERVICE_ENUMS.ipFamily, { error: 'must be one of IPv4, IPv6' })), []),
    ipFamilyPolicy: z
      .enum(SERVICE_ENUMS.ipFamilyPolicy, {
        error: 'must be one of SingleStack, PreferDualStack, RequireDualStack',
      })
      .nullish(),
    ports: orDefault(z.array(servicePort), []),
    externalIPs: orDefault(z.array(ipAddress), []),
    externalTrafficPolicy: orDefault(
      z.enum(SERVICE_ENUMS.externalTrafficPolicy, { error: 'must be one of Cluster, Local' }),
      'Cluster',
    ).transform((v) => (v === 'Global' ? 'Cluster' : v)),
    internalTrafficPolicy: orDefault(z.enum(SERVICE_ENUMS.internalTrafficPolicy, { error: 'must be one of Cluster, Local' }), 'Cluster'),
    sessionAffinity: orDefault(z.enum(SERVICE_ENUMS.sessionAffinity, { error: 'must be one of None, ClientIP' }), 'None'),
    sessionAffinityConfig: z
      .object({
        clientIP: z
          .object({
            timeoutSeconds: orDefault(
              z
                .int({ error: 'must be an integer' })
                .min(1, { error: 'must be between 1 and 86400' })
                .max(86400, { error: 'must be between 1 and 86400' }),
              DEFAULT_AFFINITY_TIMEOUT_SECONDS,
            ),
          })
          .nullish(),
      })
      .nullish(),
    loadBalancerSourceRanges: orDefault(z.array(cidr), []),
    // Allocated by the API server for LoadBalancer Services with externalTrafficPolicy Local.
    healthCheckNodePort: portNumber.nullish(),
    externalName: z.string().nullish(),
  })
  .superRefine((spec, ctx) => {
    // The API server's own rules that the model relies on: port names tell
    // ports apart when matching EndpointSlice ports, so they must be unique
    // and present when there are several; port/protocol pairs must be unique.
    const names = new Set<string>();
    const pairs = new Set<string>();
    spec.ports.forEach((p, i) => {
      if (spec.ports.length > 1 && p.name === '') {
        ctx.addIssue({ code: 'custom', path: ['ports', i, 'name'], message: 'is required when a Service has several ports' });
      } else if (names.has(p.name)) {
        ctx.addIssue({ code: 'custom', path: ['ports', i, 'name'], message: 'duplicates another port name', input: p.name });
      }
      names.add(p.name);
      const pair = `${p.port}/${p.protocol}`;
      if (pairs.has(pair)) {
        ctx.addIssue({
          code: 'custom',
          path: ['ports', i, 'port'],
          message: 'duplicates another port with the same protocol',
          input: p.port,
        });
      }
      pairs.add(pair);
    });
    const first = spec.clusterIPs[0];
    if (spec.clusterIP !== '' && first !== undefined && first !== spec.clusterIP) {
      ctx.addIssue({
        code: 'custom',
        path: ['clusterIPs', 0],
        message: `must equal spec.clusterIP (${JSON.stringify(spec.clusterIP)})`,
        input: first,
      });
    }
    dualStackRules(spec, ctx);
  });

/**
 * The API server's dual-stack rules the model relies on: at most one cluster
 * IP per family, ipFamilies naming the family of each cluster IP in the same
 * order, and SingleStack meaning one family.
 */
function dualStackRules(
  spec: { clusterIPs: string[]; ipFamilies: Array<'IPv4' | 'IPv6'>; ipFamilyPolicy?: string | null | undefined },
  ctx: z.RefinementCtx,
): void {
  const ips = spec.clusterIPs.filter((ip) => ip !== '' && ip !== 'None');
  const families = ips.map((ip) => (familyOf(ip) === 6 ? 'IPv6' : 'IPv4'));
  if (ips.length > 2 || (families.length === 2 && families[0] === families[1])) {
    ctx.addIssue({ code: 'custom', path: ['clusterIPs'], message: 'may hold at most one address of each family', input: spec.clusterIPs });
  }
  if (spec.ipFamilies.length > 2 || (spec.ipFamilies.length === 2 && spec.ipFamilies[0] === spec.ipFamilies[1])) {
    ctx.addIssue({ code: 'custom', path: ['ipFamilies'], message: 'may name each family at most once', input: spec.ipFamilies });
  }
  families.forEach((f, i) => {
    const named = spec.ipFamilies[i];
    if (named !== undefined && named !== f) {
      ctx.addIssue({ code: 'custom', path: ['clusterIPs', i], message: `is ${f} but ipFamilies[${i}] is ${named}`, input: ips[i] });
    }
  });
  if (spec.ipFamilyPolicy === 'SingleStack' && (spec.ipFamilies.length > 1 || ips.length > 1)) {
    ctx.addIssue({
      code: 'custom',
      path: ['ipFamilyPolicy'],
      message: 'is SingleStack but the Service has two families',
      input: spec.ipFamilyPolicy,
    });
  }
}

const serviceStatus = z.object({
  loadBalancer: z
    .object({
      ingress: orDefault(
        z.array(
          z.object({
            ip: ipAddress.nullish(),
            hostname: z.string().nullish(),
            // ipMode Proxy: the load balancer proxies; the node must not capture the IP.
            ipMode: z.enum(['VIP', 'Proxy'], { error: 'must be one of VIP, Proxy' }).nullish(),
          }),
        ),
        [],
      ),
    })
    .nullish(),
});

/** The Service annotations svcmap reads (src/model/service-options.ts says what each means). */
export const SERVICE_ANNOTATIONS = [
  METADATA_KEYS.lbAlgorithm.key,
  METADATA_KEYS.sourceHashPort.key,
  METADATA_KEYS.maglevTableSize.key,
  METADATA_KEYS.lbMode.key,
] as const;
export type ServiceAnnotation = (typeof SERVICE_ANNOTATIONS)[number];

// Only svcmap's own annotations are kept, as strings, and only when there is
// one: the rest (last-applied-configuration and the like) is dropped at once.
// Their values are judged by the model, which reports a bad one on the
// Service and goes on with the default: never an invalid object.
const serviceMeta = namespacedMeta
  .extend({
    annotations: z.record(z.string(), z.unknown()).nullish(),
  })
  .transform(({ annotations, ...meta }) => {
    let kept: Partial<Record<ServiceAnnotation, string>> | undefined;
    for (const name of SERVICE_ANNOTATIONS) {
      const v = annotations?.[name];
      if (typeof v === 'string') (kept ??= {})[name] = v;
    }
    const out: typeof meta & { annotations?: Partial<Record<ServiceAnnotation, string>> } = meta;
    if (kept) out.annotations = kept;
    return out;
  });

export const ServiceSchema = z.object({
  apiVersion: z.literal('v1', { error: 'must be v1' }),
  kind: z.literal('Service'),
  metadata: serviceMeta,
  spec: serviceSpec,
  status: serviceStatus.nullish(),
});

// ---------------------------------------------------------------- EndpointSlice (discovery.k8s.io/v1)

/** Resolved with the API's nil semantics: ready nil => true, serving nil => ready, terminating nil => false. */
const conditions = z
  .object({
    ready: z.boolean({ error: 'must be true or false' }).nullish(),
    serving: z.boolean({ error: 'must be true or false' }).nullish(),
    terminating: z.boolean({ error: 'must be true or false' }).nullish(),
  })
  .nullish()
  .transform((c) => {
    const ready = c?.ready ?? true;
    return { ready, serving: c?.serving ?? ready, terminating: c?.terminating ?? false };
  });

function endpoint<A extends z.ZodType<string>>(address: A) {
  return z.object({
    addresses: z.array(address).min(1, { error: 'must hold at least one address' }),
    conditions,
    nodeName: z
      .string()
      .nullish()
      .transform((v) => v ?? undefined),
    zone: z
      .string()
      .nullish()
      .transform((v) => v ?? undefined),
    // Topology Aware Routing: the zones (PreferClose) and nodes (PreferSameNode) the EndpointSlice controller meant the endpoint for, as names.
    hints: z
      .object({
        forZones: orDefault(z.array(z.object({ name: z.string() })), []),
        forNodes: orDefault(z.array(z.object({ name: z.string() })), []),
      })
      .nullish()
      .transform((h) => ({
        zones: h?.forZones.length ? h.forZones.map((f) => f.name) : undefined,
        nodes: h?.forNodes.length ? h.forNodes.map((f) => f.name) : undefined,
      })),
  });
}

const endpointPort = z.object({
  name: orDefault(portName, ''),
  // nil means "all ports"; kube-proxy ignores such ports, and so does the model.
  port: portNumber.nullish().transform((v) => v ?? undefined),
  protocol,
});

const sliceCommon = {
  apiVersion: z.literal('discovery.k8s.io/v1', { error: 'must be discovery.k8s.io/v1' }),
  kind: z.literal('EndpointSlice'),
  metadata: sliceMeta,
  ports: orDefault(z.array(endpointPort), []),
};

const FQDN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\.?$/i;

// One variant per addressType, so addresses are checked against the slice's own
// family and every bad address is reported with its exact path in one pass.
export const EndpointSliceSchema = z.discriminatedUnion(
  'addressType',
  [
    z.object({
      ...sliceCommon,
      addressType: z.literal('IPv4'),
      endpoints: orDefault(z.array(endpoint(canonicalized(canonicalIpv4, 'must be an IPv4 address (addressType is IPv4)'))), []),
    }),
    z.object({
      ...sliceCommon,
      addressType: z.literal('IPv6'),
      endpoints: orDefault(z.array(endpoint(canonicalized(canonicalIpv6, 'must be an IPv6 address (addressType is IPv6)'))), []),
    }),
    z.object({
      ...sliceCommon,
      addressType: z.literal('FQDN'),
      endpoints: orDefault(z.array(endpoint(z.string().regex(FQDN, { error: 'must be a DNS name (addressType is FQDN)' }))), []),
    }),
  ],
  { error: 'must be one of IPv4, IPv6, FQDN' },
);

// ---------------------------------------------------------------- Node (v1)

/** InternalIP and ExternalIP addresses must be IPs (made canonical like every other); other types are host names. */
const nodeAddress = z.object({ type: z.string(), address: z.string() }).transform((a, ctx) => {
  if (a.type !== 'InternalIP' && a.type !== 'ExternalIP') return a;
  const ip = ipAddress.safeParse(a.address);
  if (ip.success) return { ...a, address: ip.data };
  ctx.addIssue({ code: 'custom', path: ['address'], message: `must be an IP address (type is ${a.type})`, input: a.address });
  return z.NEVER;
});

// deletionTimestamp and the taints' keys: whether the node is on its way out
// (kube-proxy's /healthz then fails, so load balancers drain it first).
export const NodeSchema = z.object({
  apiVersion: z.literal('v1', { error: 'must be v1' }),
  kind: z.literal('Node'),
  metadata: clusterMeta.extend({ deletionTimestamp: z.string().nullish() }),
  spec: orDefault(z.object({ taints: orDefault(z.array(z.object({ key: z.string() })), []) }), { taints: [] }),
  status: orDefault(z.object({ addresses: orDefault(z.array(nodeAddress), []) }), { addresses: [] }),
});

// ---------------------------------------------------------------- Pod (v1)

/** Of the annotations, only svcmap.io/socket-lb is kept (as socketLb, a string; socket-lb-bypass.ts judges it). */
function socketLbOf<M extends { annotations?: Record<string, unknown> | null | undefined }>({
  annotations,
  ...meta
}: M): Omit<M, 'annotations'> & { socketLb?: string } {
  const v = annotations?.[METADATA_KEYS.socketLb.key];
  return typeof v === 'string' ? { ...meta, socketLb: v } : meta;
}

// Only what hostPort mappings need (src/model/host-ports.ts), and the output
// keeps only that: the ports that have a hostPort, the phase, the pod's IPs.
// A node holds ~100 Pods; most have no hostPort and become a few fields.

const containerPort = z.object({
  containerPort: portNumber,
  hostPort: portNumber.nullish(),
  // "" (or absent): every address of the node.
  hostIP: orDefault(z.union([z.literal(''), ipAddress], { error: 'must be an IP address or ""' }), ''),
  protocol,
});

const container = z.object({ ports: orDefault(z.array(containerPort), []) });

/** One container port with a hostPort, and where it is in the Pod (for problems). */
export interface PodHostPort {
  containerPort: number;
  hostPort: number;
  hostIP: string;
  protocol: (typeof PROTOCOL_NAMES)[number];
  path: string;
}

export const PodSchema = z
  .object({
    apiVersion: z.literal('v1', { error: 'must be v1' }),
    kind: z.literal('Pod'),
    metadata: namespacedMeta
      .omit({ labels: true })
      .extend({
        creationTimestamp: orDefault(z.string(), ''),
        uid: orDefault(z.string(), ''),
        annotations: z.record(z.string(), z.unknown()).nullish(),
      })
      .transform(socketLbOf),
    spec: z.object({
      nodeName: orDefault(z.string(), ''),
      hostNetwork: orDefault(z.boolean({ error: 'must be true or false' }), false),
      containers: orDefault(z.array(container), []),
    }),
    status: orDefault(
      z.object({
        phase: orDefault(z.string(), ''),
        podIPs: orDefault(z.array(z.object({ ip: ipAddress })), []),
      }),
      { phase: '', podIPs: [] },
    ),
  })
  .transform(({ apiVersion, kind, metadata, spec, status }) => {
    const hostPorts: PodHostPort[] = [];
    spec.containers.forEach((c, i) => {
      c.ports.forEach((p, j) => {
        if (p.hostPort == null) return;
        const { containerPort, hostPort, hostIP, protocol } = p;
        hostPorts.push({ containerPort, hostPort, hostIP, protocol, path: `spec.containers[${i}].ports[${j}]` });
      });
    });
    return {
      apiVersion,
      kind,
      metadata,
      nodeName: spec.nodeName,
      hostNetwork: spec.hostNetwork,
      phase: status.phase,
      podIPs: status.podIPs.map((a) => a.ip),
      hostPorts,
    };
  });

// ---------------------------------------------------------------- Namespace (v1)

// Only its name and svcmap.io/socket-lb (socket-lb-bypass.ts).
export const NamespaceSchema = z.object({
  apiVersion: z.literal('v1', { error: 'must be v1' }),
  kind: z.literal('Namespace'),
  metadata: z.object({ name: objectName, annotations: z.record(z.string(), z.unknown()).nullish() }).transform(socketLbOf),
});

// ---------------------------------------------------------------- types and validation

export type Service = z.output<typeof ServiceSchema>;
export type ServicePort = Service['spec']['ports'][number];
export type EndpointSlice = z.output<typeof EndpointSliceSchema>;
export type Endpoint = EndpointSlice['endpoints'][number];
export type EndpointPort = EndpointSlice['ports'][number];
export type Node = z.output<typeof NodeSchema>;
/** A Pod as far as its hostPorts go (PodSchema's output). */
export type Pod = z.output<typeof PodSchema>;
export type Namespace = z.output<typeof NamespaceSchema>;
export type KubeObject = Service | EndpointSlice | Node | Pod | Namespace;
export type SupportedKind = KubeObject['kind'];

export type ValidationResult = { ok: true; obj: KubeObject } | { ok: false; problems: Problem[] };

/** API group each kind must come from; a `serving.knative.dev` Service is not ours. */
const GROUPS: Record<SupportedKind, string> = { Service: '', Node: '', EndpointSlice: 'discovery.k8s.io', Pod: '', Namespace: '' };

export const SCHEMAS: Record<SupportedKind, z.ZodType<KubeObject>> = {
  Service: ServiceSchema,
  EndpointSlice: EndpointSliceSchema,
  Node: NodeSchema,
  Pod: PodSchema,
  Namespace: NamespaceSchema,
};

export function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/**
 * The kind svcmap would validate this object as, or undefined for objects it
 * does not consume (ConfigMaps, Knative Services, ...). A missing apiVersion
 * counts as ours so that validation can say it is missing.
 */
export function supportedKind(raw: unknown): SupportedKind | undefined {
  if (!isRecord(raw) || typeof raw.kind !== 'string' || !Object.hasOwn(GROUPS, raw.kind)) return undefined;
  const kind = raw.kind as SupportedKind;
  if (typeof raw.apiVersion !== 'string') return kind;
  const group = raw.apiVersion.includes('/') ? raw.apiVersion.slice(0, raw.apiVersion.lastIndexOf('/')) : '';
  return group === GROUPS[kind] ? kind : undefined;
}

/** kind, namespace and name read from an object that may be invalid, for naming it in problems. */
export function identify(raw: unknown): { kind: string; namespace: string; name: string } {
  const r = isRecord(raw) ? raw : {};
  const meta = isRecord(r.metadata) ? r.metadata : {};
  const kind = typeof r.kind === 'string' ? r.kind : '';
  const name = typeof meta.name === 'string' ? meta.name : '';
  let namespace = typeof meta.namespace === 'string' ? meta.namespace : '';
  if (namespace === '' && (kind === 'Service' || kind === 'EndpointSlice' || kind === 'Pod')) namespace = 'default';
  return { kind, namespace, name };
}
