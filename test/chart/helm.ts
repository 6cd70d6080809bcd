// Helpers for the chart tests: run the real helm (installed by
// `make chart-deps` into .tools/bin) and parse what it renders.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments } from 'yaml';

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const CHART = join(ROOT, 'charts', 'svcmap');
export const EDGE_VALUES = join(ROOT, 'test', 'chart', 'edge-values.yaml');
export const HELM = process.env.HELM ?? join(ROOT, '.tools', 'bin', 'helm');
// Fixed, so renders do not depend on helm's built-in default.
export const KUBE_VERSION = '1.34.4';

export type Obj = Record<string, unknown>;

export interface Manifest {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  [key: string]: unknown;
}

export interface HelmResult {
  status: number | null;
  stdout: string;
  stderr: string;
}

export function helmMissingMessage(): string | undefined {
  if (existsSync(HELM)) return undefined;
  return `helm not found at ${HELM}: run \`make chart-deps\` (or \`make helm\`) first; the chart tests need the real helm`;
}

export function helm(args: string[]): HelmResult {
  const missing = helmMissingMessage();
  if (missing) throw new Error(missing);
  const r = spawnSync(HELM, args, {
    encoding: 'utf8',
    // No cluster, no user config: renders must not depend on the machine.
    env: {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      HOME: process.env.HOME ?? '/tmp',
      KUBECONFIG: '/dev/null',
      HELM_CACHE_HOME: join(ROOT, '.tools', 'helm-home', 'cache'),
      HELM_CONFIG_HOME: join(ROOT, '.tools', 'helm-home', 'config'),
      HELM_DATA_HOME: join(ROOT, '.tools', 'helm-home', 'data'),
    },
    timeout: 60_000,
  });
  if (r.error) throw r.error;
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

export interface RenderOptions {
  set?: string[];
  setString?: string[];
  valuesFiles?: string[];
  kubeVersion?: string;
  namespace?: string;
  release?: string;
  chart?: string;
  extra?: string[];
}

export function templateArgs(o: RenderOptions = {}): string[] {
  const args = [
    'template',
    o.release ?? 'svcmap',
    o.chart ?? CHART,
    '--namespace',
    o.namespace ?? 'kube-system',
    '--kube-version',
    o.kubeVersion ?? KUBE_VERSION,
  ];
  for (const f of o.valuesFiles ?? []) args.push('--values', f);
  for (const s of o.set ?? []) args.push('--set', s);
  for (const s of o.setString ?? []) args.push('--set-string', s);
  args.push(...(o.extra ?? []));
  return args;
}

// Renders the chart; throws with helm's stderr when the render fails.
export function render(o: RenderOptions = {}): Manifest[] {
  const r = helm(templateArgs(o));
  if (r.status !== 0) throw new Error(`helm template failed (exit ${r.status}):\n${r.stderr}`);
  return parseManifests(r.stdout);
}

export function parseManifests(text: string): Manifest[] {
  const out: Manifest[] = [];
  for (const doc of parseAllDocuments(text)) {
    if (doc.errors.length > 0) throw new Error(`rendered YAML does not parse: ${doc.errors[0]?.message}`);
    const v: unknown = doc.toJS();
    if (v === null || v === undefined) continue;
    if (typeof v !== 'object' || Array.isArray(v)) throw new Error(`rendered document is not an object: ${JSON.stringify(v)}`);
    const m = v as Manifest;
    if (typeof m.kind !== 'string' || typeof m.apiVersion !== 'string') {
      throw new Error(`rendered document without kind/apiVersion: ${JSON.stringify(v).slice(0, 200)}`);
    }
    out.push(m);
  }
  return out;
}

export function byKind(ms: Manifest[], kind: string): Manifest[] {
  return ms.filter((m) => m.kind === kind);
}

export function one(ms: Manifest[], kind: string, name: string): Manifest {
  const found = ms.filter((m) => m.kind === kind && m.metadata.name === name);
  if (found.length !== 1) {
    const have = ms.map((m) => `${m.kind}/${m.metadata.name}`).join(', ');
    throw new Error(`expected exactly one ${kind}/${name}, found ${found.length} (rendered: ${have})`);
  }
  return found[0] as Manifest;
}

export function isHook(m: Manifest, hook?: string): boolean {
  const h = m.metadata.annotations?.['helm.sh/hook'];
  if (h === undefined) return false;
  return hook === undefined || h.split(',').includes(hook);
}

// Loose views of the pod API used by the assertions.
export interface Probe {
  httpGet?: { path?: string; port?: number | string; host?: string };
  exec?: { command?: string[] };
  [key: string]: unknown;
}

export interface Container {
  name: string;
  image?: string;
  command?: string[];
  args?: string[];
  env?: { name: string; value?: string; valueFrom?: Obj }[];
  ports?: { name?: string; containerPort: number; protocol?: string }[];
  securityContext?: {
    privileged?: boolean;
    allowPrivilegeEscalation?: boolean;
    runAsUser?: number;
    runAsNonRoot?: boolean;
    capabilities?: { add?: string[]; drop?: string[] };
    [key: string]: unknown;
  };
  volumeMounts?: { name: string; mountPath: string; mountPropagation?: string; readOnly?: boolean }[];
  livenessProbe?: Probe;
  readinessProbe?: Probe;
  startupProbe?: Probe;
  resources?: Obj;
  terminationMessagePolicy?: string;
}

export interface Volume {
  name: string;
  hostPath?: { path: string; type?: string };
  configMap?: { name: string };
  [key: string]: unknown;
}

export interface PodSpec {
  containers: Container[];
  initContainers?: Container[];
  volumes?: Volume[];
  hostNetwork?: boolean;
  hostPID?: boolean;
  hostIPC?: boolean;
  dnsPolicy?: string;
  serviceAccountName?: string;
  priorityClassName?: string;
  tolerations?: Obj[];
  securityContext?: Obj;
  [key: string]: unknown;
}

// The pod spec of a workload (DaemonSet, Job, Deployment) or a Pod.
export function podSpec(m: Manifest): PodSpec | undefined {
  if (m.kind === 'Pod') return m.spec as PodSpec;
  const spec = m.spec as { template?: { spec?: PodSpec }; jobTemplate?: { spec?: { template?: { spec?: PodSpec } } } } | undefined;
  return spec?.template?.spec ?? spec?.jobTemplate?.spec?.template?.spec;
}

export function allContainers(spec: PodSpec): Container[] {
  return [...(spec.initContainers ?? []), ...spec.containers];
}

export function container(spec: PodSpec, name: string): Container {
  const c = allContainers(spec).find((x) => x.name === name);
  if (!c)
    throw new Error(
      `no container ${name} (have ${allContainers(spec)
        .map((x) => x.name)
        .join(', ')})`,
    );
  return c;
}

export function envValue(c: Container, name: string): string | undefined {
  return c.env?.find((e) => e.name === name)?.value;
}

export function sorted(xs: readonly string[] | undefined): string[] {
  return [...(xs ?? [])].sort();
}
