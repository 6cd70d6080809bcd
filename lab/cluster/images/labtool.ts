// labtool: the test tool of the cluster checks (labtool/, Go, standard
// library only), FROM scratch with a static busybox for `kubectl exec ... sh`,
// and iptables (nf_tables; this machine's, with the libraries it needs) for
// the mesh check's init container, which installs a sidecar's REDIRECT as
// istio-init does.
import { copyFileSync, mkdirSync, readdirSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { DEFAULT_PATH } from './buildah.ts';
import { busyboxInput, installBusybox } from './busybox.ts';
import { exec } from './exec.ts';
import type { Recipe } from './recipe.ts';
import { completeRuntimeRoot } from './runtime-root.ts';

const XTABLES = '/usr/sbin/xtables-nft-multi';
const XTABLES_EXTENSIONS = '/usr/lib/x86_64-linux-gnu/xtables';

/** iptables and ip6tables (nf_tables) with their extensions, from this machine. */
function installIptables(root: string): void {
  mkdirSync(join(root, 'usr/sbin'), { recursive: true });
  copyFileSync(XTABLES, join(root, XTABLES));
  for (const name of ['iptables', 'ip6tables']) symlinkSync('xtables-nft-multi', join(root, 'usr/sbin', name));
  mkdirSync(join(root, XTABLES_EXTENSIONS), { recursive: true });
  for (const f of readdirSync(XTABLES_EXTENSIONS)) copyFileSync(join(XTABLES_EXTENSIONS, f), join(root, XTABLES_EXTENSIONS, f));
}

const SOURCE = fileURLToPath(new URL('labtool/', import.meta.url));

const go = (args: string[], cwd?: string) =>
  exec('go', args, { cwd, env: { ...process.env, CGO_ENABLED: '0', GOTOOLCHAIN: 'local', GOFLAGS: '' } });

export const labtool: Recipe = {
  name: 'labtool',
  module: import.meta.url,
  async inputs() {
    return [
      { path: SOURCE },
      { fact: (await go(['version'])).trim() },
      busyboxInput(),
      { fact: (await exec(XTABLES, ['iptables', '--version'])).trim() },
    ];
  },
  async ref(key) {
    return `localhost/svcmap-labtool:${key}`;
  },
  config: {
    entrypoint: ['/labtool'],
    cmd: ['serve', '--tcp', '8080', '--udp', '8081', '--http', '8082'],
    env: { PATH: DEFAULT_PATH },
    ports: ['8080/tcp', '8081/udp', '8082/tcp'],
  },
  binary: 'labtool', // the e2e's checks from outside the cluster run the same client
  async fill(root, ctx) {
    await ctx.step('go build labtool', () =>
      go(['build', '-trimpath', '-buildvcs=false', '-ldflags=-s -w', '-o', join(root, 'labtool'), '.'], SOURCE),
    );
    // (The real-node probe saw busybox's wget segfault in a pod; `labtool
    // http` is the HTTP client to rely on.)
    installBusybox(root);
    await ctx.step('iptables', async () => {
      installIptables(root);
      completeRuntimeRoot('/', root);
    });
  },
};
