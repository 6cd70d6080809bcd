// Run as a process of its own (a fresh module graph): records every module
// URL resolved while svcmap's client-node entry (src/sources/kubernetes/
// client-node.ts) loads, then uses what it exports as svcmap does, and prints
// {"loaded": [client-node files], "authorization", "selector"} as JSON.
//   node test/apiserver/client-node-slim-probe.ts
import { registerHooks } from 'node:module';

const loaded: string[] = [];
registerHooks({
  resolve(specifier, context, nextResolve) {
    const r = nextResolve(specifier, context);
    loaded.push(r.url);
    return r;
  },
});
const cn = await import('../../src/sources/kubernetes/client-node.ts');
const kc = new cn.KubeConfig();
kc.loadFromOptions({
  clusters: [{ name: 'c', server: 'https://127.0.0.1:6443', skipTLSVerify: false }],
  users: [{ name: 'u', token: 'probe-token' }],
  contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
  currentContext: 'x',
});
const ctx = new cn.RequestContext('https://127.0.0.1:6443/api/v1/services', cn.HttpMethod.GET);
await kc.applySecurityAuthentication(ctx);
// ListWatch passes its selectors through the (slim) serializer into the watch query.
let selector: unknown;
const watch = {
  watch: async (_path: string, query: Record<string, unknown>) => {
    selector = query.labelSelector;
    throw new Error('probe: no watch');
  },
};
const lw = new cn.ListWatch(
  '/api/v1/services',
  watch as never,
  async () => ({ items: [], metadata: { resourceVersion: '1' } }) as never,
  false,
  'a!=b',
);
lw.on('error', () => {});
await lw.start().catch(() => {});
await lw.stop();
const dist = new URL('./', import.meta.resolve('@kubernetes/client-node/dist/config.js')).href;
process.stdout.write(
  `${JSON.stringify({
    loaded: [...new Set(loaded.filter((u) => u.startsWith(dist)).map((u) => u.slice(dist.length)))].sort(),
    authorization: ctx.getHeaders()['Authorization'],
    selector,
  })}\n`,
);
