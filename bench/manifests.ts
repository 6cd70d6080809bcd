// Kubernetes objects for the bench's services: what the file source reads
// from a manifest directory (JSON Lists of 1000 services per file, or YAML:
// one file for all, or a file per service) and what the
// test API server serves. Shaped like the API's own output.
import { mkdirSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { dump } from 'js-yaml';
import { NAMESPACE, PORT, PORT_NAME, TARGET_PORT, type BenchService } from './workload.ts';

export const TRIGGER_ANNOTATION = 'endpoints.kubernetes.io/last-change-trigger-time';

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
    docs.push(
      `---\n# Source: bench/templates/${s.name}.yaml\n${yamlOf(serviceObject(s))}`,
      `---\n# Source: bench/templates/${s.name}.yaml\n${yamlOf(sliceObject(s))}`,
    );
  }
  return docs.join('');
}

/**
 * How the services lie in the manifest directory: JSON Lists of 1000
 * services each; one YAML file holding them all as a `kind: List`; or one
 * YAML file per service, its Service and slice as two documents.
 */
export const MANIFEST_LAYOUTS = ['json', 'yaml-one-file', 'yaml-file-each'] as const;
export type ManifestLayout = (typeof MANIFEST_LAYOUTS)[number];

const PER_FILE: Record<ManifestLayout, number> = { json: 1000, 'yaml-one-file': Number.MAX_SAFE_INTEGER, 'yaml-file-each': 1 };

function fileName(layout: ManifestLayout, chunk: number): string {
  return layout === 'json' ? `services-${String(chunk).padStart(4, '0')}.json` : `services-${String(chunk).padStart(5, '0')}.yaml`;
}

function fileText(layout: ManifestLayout, services: readonly BenchService[]): string {
  if (layout === 'yaml-one-file') return yamlList(services);
  if (layout === 'yaml-file-each') return yamlDocuments(services);
  const items: unknown[] = [];
  for (const s of services) items.push(serviceObject(s), sliceObject(s));
  return JSON.stringify({ apiVersion: 'v1', kind: 'List', items });
}

/** Replaces the manifests in dir with these services, laid out as `layout` says; the number of files. */
export function writeManifestDir(dir: string, services: readonly BenchService[], layout: ManifestLayout = 'json'): number {
  mkdirSync(dir, { recursive: true });
  for (const f of readdirSync(dir)) rmSync(join(dir, f), { force: true, recursive: true });
  const per = PER_FILE[layout];
  let files = 0;
  for (let i = 0; i < services.length; i += per)
    writeFileSync(join(dir, fileName(layout, files++)), fileText(layout, services.slice(i, i + per)));
  return files;
}

/** Rewrites (atomically: temp file + rename) the file holding service s, with s as given. */
export function rewriteServiceFile(dir: string, all: readonly BenchService[], s: BenchService, layout: ManifestLayout = 'json'): void {
  const per = PER_FILE[layout];
  const chunk = Math.floor(s.index / per);
  const services = all.slice(chunk * per, (chunk + 1) * per).map((o) => (o.index === s.index ? s : o));
  const tmp = join(dir, `.${fileName(layout, chunk)}.tmp`);
  writeFileSync(tmp, fileText(layout, services));
  renameSync(tmp, join(dir, fileName(layout, chunk)));
}
