// Kubernetes objects for the bench's services: what the file source reads
// from a manifest directory (JSON Lists, 1000 services per file) and what the
// test API server serves. Shaped like the API's own output.
import { mkdirSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { dump } from 'js-yaml';
import { NAMESPACE, PORT, PORT_NAME, TARGET_PORT, type BenchService } from './workload.ts';

export const TRIGGER_ANNOTATION = 'endpoints.kubernetes.io/last-change-trigger-time';
const PER_FILE = 1000;

export function serviceObject(s: BenchService): Record<string, unknown> {
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name: s.name, namespace: NAMESPACE, uid: `uid-${s.name}`, ...(s.annotations ? { annotations: s.annotations } : {}) },
    spec: {
      type: 'ClusterIP',
      clusterIP: s.vip,
      clusterIPs: [s.vip],
      ...(s.vip.includes(':') ? { ipFamilies: ['IPv6'], ipFamilyPolicy: 'SingleStack' } : {}),
      selector: { app: s.name },
      ports: [{ name: PORT_NAME, protocol: 'TCP', port: PORT, targetPort: TARGET_PORT }],
    },
  };
}

export function sliceName(s: BenchService): string {
  return `${s.name}-bench`;
}

/** The service's EndpointSlice; `triggerTime` sets endpoints.kubernetes.io/last-change-trigger-time. */
export function sliceObject(s: BenchService, triggerTime?: Date): Record<string, unknown> {
  const metadata: Record<string, unknown> = {
    name: sliceName(s),
    namespace: NAMESPACE,
    labels: { 'kubernetes.io/service-name': s.name, 'endpointslice.kubernetes.io/managed-by': 'endpointslice-controller.k8s.io' },
  };
  if (triggerTime) metadata.annotations = { [TRIGGER_ANNOTATION]: triggerTime.toISOString() };
  return {
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    metadata,
    addressType: s.vip.includes(':') ? 'IPv6' : 'IPv4',
    ports: [{ name: PORT_NAME, protocol: 'TCP', port: TARGET_PORT }],
    endpoints: s.endpoints.map((ip) => ({ addresses: [ip], conditions: { ready: true, serving: true, terminating: false } })),
  };
}

/** Dumped as kubectl prints YAML: block style, a sequence not indented under its key. */
function yamlOf(v: unknown): string {
  return dump(v, { seqNoIndent: true, lineWidth: -1 });
}

/** The services and their slices as one `kind: List`, the shape of `kubectl get svc,endpointslices -o yaml`. */
export function yamlList(services: readonly BenchService[]): string {
  const items: unknown[] = [];
  for (const s of services) items.push(serviceObject(s), sliceObject(s));
  return yamlOf({ apiVersion: 'v1', kind: 'List', items, metadata: { resourceVersion: '' } });
}

/** The services and their slices as a multi-document stream, each document after a `---` and a comment, as a rendered chart writes them. */
export function yamlDocuments(services: readonly BenchService[]): string {
  const docs: string[] = [];
  for (const s of services) {
    docs.push(`---\n# Source: bench/templates/${s.name}.yaml\n${yamlOf(serviceObject(s))}`, `---\n# Source: bench/templates/${s.name}.yaml\n${yamlOf(sliceObject(s))}`);
  }
  return docs.join('');
}

function fileName(chunk: number): string {
  return `services-${String(chunk).padStart(4, '0')}.json`;
}

/** Replaces the manifests in dir with these services (each file a List of 1000 services and their slices). */
export function writeManifestDir(dir: string, services: readonly BenchService[]): number {
  mkdirSync(dir, { recursive: true });
  for (const f of readdirSync(dir)) rmSync(join(dir, f), { force: true, recursive: true });
  let files = 0;
  for (let i = 0; i < services.length; i += PER_FILE) {
    const items: unknown[] = [];
    for (const s of services.slice(i, i + PER_FILE)) items.push(serviceObject(s), sliceObject(s));
    writeFileSync(join(dir, fileName(files++)), JSON.stringify({ apiVersion: 'v1', kind: 'List', items }));
  }
  return files;
}

/** Rewrites (atomically: temp file + rename) the file holding service s, with s as given. */
export function rewriteServiceFile(dir: string, all: readonly BenchService[], s: BenchService): void {
  const chunk = Math.floor(s.index / PER_FILE);
  const items: unknown[] = [];
  for (const o of all.slice(chunk * PER_FILE, (chunk + 1) * PER_FILE)) {
    const cur = o.index === s.index ? s : o;
    items.push(serviceObject(cur), sliceObject(cur));
  }
  const tmp = join(dir, `.${fileName(chunk)}.tmp`);
  writeFileSync(tmp, JSON.stringify({ apiVersion: 'v1', kind: 'List', items }));
  renameSync(tmp, join(dir, fileName(chunk)));
}
