// What the Kubernetes release we test against expects, read from its own
// source (the module make cluster-bins builds from) rather than copied here:
// the names e2e.test pulls its images by (test/utils/image/manifest.go) and
// files the upstream images contain.
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { REPO_ROOT } from '../paths.ts';

const K8S_GO_MOD = join(REPO_ROOT, 'lab', 'cluster', 'modules', 'kubernetes', 'go.mod');

/** v1.34.4: the require line of the module that builds the binaries. */
export function kubernetesVersion(): string {
  const v = /^require k8s\.io\/kubernetes (v[\d.]+)$/m.exec(readFileSync(K8S_GO_MOD, 'utf8'))?.[1];
  if (!v) throw new Error(`no "require k8s.io/kubernetes vX.Y.Z" line in ${K8S_GO_MOD}`);
  return v;
}

let modDir: string | undefined;

/** k8s.io/kubernetes@<version> in Go's module cache (downloaded by make cluster-bins). */
export function kubernetesSource(): string {
  if (modDir) return modDir;
  const cache = execFileSync('go', ['env', 'GOMODCACHE'], { encoding: 'utf8' }).trim();
  const dir = join(cache, 'k8s.io', `kubernetes@${kubernetesVersion()}`);
  if (!existsSync(dir)) throw new Error(`${dir} is missing: run make cluster-bins (it downloads the Kubernetes module)`);
  return (modDir = dir);
}

/**
 * The reference e2e.test uses for one of its images, e.g. "Agnhost" ->
 * registry.k8s.io/e2e-test-images/agnhost:2.56, from the lines
 *   configs[Agnhost] = Config{list.PromoterE2eRegistry, "agnhost", "2.56"}
 *   PromoterE2eRegistry: "registry.k8s.io/e2e-test-images",
 */
export function e2eImageRef(id: string): string {
  const file = join(kubernetesSource(), 'test', 'utils', 'image', 'manifest.go');
  const src = readFileSync(file, 'utf8');
  const cfg = new RegExp(`configs\\[${id}\\] = Config\\{list\\.(\\w+), "([^"]+)", "([^"]+)"\\}`).exec(src);
  const registry = cfg && new RegExp(`^\\s*${cfg[1]}:\\s*"([^"]+)"`, 'm').exec(src)?.[1];
  if (!cfg || !registry) throw new Error(`cannot find the image ${id} in ${file}`);
  return `${registry}/${cfg[2]}:${cfg[3]}`;
}
