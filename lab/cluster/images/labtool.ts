// labtool: the test tool of the cluster checks (labtool/, Go, standard
// library only), FROM scratch with a static busybox for `kubectl exec ... sh`.
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { DEFAULT_PATH } from './buildah.ts';
import { busyboxInput, installBusybox } from './busybox.ts';
import { exec } from './exec.ts';
import type { Recipe } from './recipe.ts';

const SOURCE = fileURLToPath(new URL('labtool/', import.meta.url));

const go = (args: string[], cwd?: string) =>
  exec('go', args, { cwd, env: { ...process.env, CGO_ENABLED: '0', GOTOOLCHAIN: 'local', GOFLAGS: '' } });

export const labtool: Recipe = {
  name: 'labtool',
  module: import.meta.url,
  async inputs() {
    return [{ path: SOURCE }, { fact: (await go(['version'])).trim() }, busyboxInput()];
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
  },
};
