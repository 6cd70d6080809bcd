// svcmap's entry into @kubernetes/client-node (src/sources/kubernetes/
// client-node.ts) loads KubeConfig, ListWatch, Watch and RequestContext
// without the generated APIs and models (what costs the package's import
// most of its memory), and what it loads still works: KubeConfig
// authenticates a request, ListWatch passes its selector into the watch.
// Run in a process of its own, as a module graph already holding the whole
// package would hide what is loaded.
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { runNodeScript } from '../../lab/processes.ts';
import { ObjectSerializer } from '../../src/sources/kubernetes/client-node-serializer.ts';

const PROBE = fileURLToPath(new URL('./client-node-slim-probe.ts', import.meta.url));

t.test('the slim entry loads config, cache and watch but no generated API or model', async (t) => {
  const r = await runNodeScript(PROBE, []);
  t.equal(r.code, 0, `probe exit code 0; stderr:\n${r.stderr.slice(-2000)}`);
  if (r.code !== 0) return;
  const out = JSON.parse(r.stdout.trim()) as { loaded: string[]; authorization: string; selector: string };
  for (const f of ['config.js', 'cache.js', 'watch.js', 'gen/http/http.js', 'gen/configuration.js', 'gen/servers.js'])
    t.ok(out.loaded.includes(f), `${f} loaded`);
  const heavy = out.loaded.filter((f) => /^gen\/(models|apis|types)\/|^gen\/index\.js$|^serializer\.js$|^index\.js$/.test(f));
  t.same(heavy, [], 'no generated API, model, or the package index');
  t.equal(out.authorization, 'Bearer probe-token', 'KubeConfig authenticates a RequestContext');
  t.equal(out.selector, 'a!=b', "ListWatch's label selector reaches the watch query");
});

t.test('the slim serializer passes primitives through and refuses model types', async (t) => {
  t.equal(ObjectSerializer.serialize('app=x', 'string'), 'app=x');
  t.equal(ObjectSerializer.serialize(undefined, 'V1Service'), undefined);
  t.throws(() => ObjectSerializer.serialize({}, 'V1Service'), /cannot serialize a V1Service/);
});
