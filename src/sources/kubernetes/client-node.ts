// The parts of @kubernetes/client-node svcmap uses (KubeConfig, ListWatch,
// Watch, RequestContext), loaded without its generated API. client-node's
// config.js imports gen/index.js (every generated API and model class) only
// for makeApiClient's createConfiguration and ServerConfiguration, and
// cache.js imports the model serializer only to pass the selector strings
// through; measured in a bare Node 24, importing the package costs ~85 MiB RSS,
// most of it those classes. svcmap calls no generated API: its lists, watches
// and Events are plain requests authenticated by the KubeConfig. So a resolve
// hook points exactly those two imports of those two client-node files at
// slim modules that export the same functions (the real ones, from the same
// package; see client-node-gen.ts and client-node-serializer.ts). Any other
// importer of client-node - a test using its typed APIs - gets it whole.
import { registerHooks } from 'node:module';

const DIST = new URL('./', import.meta.resolve('@kubernetes/client-node/dist/config.js')).href;
// .ts under the test runner, .js once built.
const EXT = import.meta.url.slice(import.meta.url.lastIndexOf('.'));
const slim = (name: string) => new URL(`./${name}${EXT}`, import.meta.url).href;

/** parent URL -> specifier -> what it resolves to instead. */
export const REDIRECTS: ReadonlyMap<string, ReadonlyMap<string, string>> = new Map([
  [`${DIST}config.js`, new Map([['./gen/index.js', slim('client-node-gen')]])],
  [`${DIST}cache.js`, new Map([['./serializer.js', slim('client-node-serializer')]])],
]);

registerHooks({
  resolve(specifier, context, nextResolve) {
    const to = context.parentURL === undefined ? undefined : REDIRECTS.get(context.parentURL)?.get(specifier);
    return nextResolve(to ?? specifier, context);
  },
});

// Loaded after the hook is in place (a static import would be hoisted above it).
const config = await import('@kubernetes/client-node/dist/config.js');
const cache = await import('@kubernetes/client-node/dist/cache.js');
const watch = await import('@kubernetes/client-node/dist/watch.js');
const http = await import('@kubernetes/client-node/dist/gen/http/http.js');

export const { KubeConfig } = config;
export type KubeConfig = InstanceType<typeof KubeConfig>;
export const { ListWatch } = cache;
export type ListWatch<T extends import('@kubernetes/client-node').KubernetesObject> = InstanceType<typeof ListWatch<T>>;
export const { Watch } = watch;
export type Watch = InstanceType<typeof Watch>;
export const { HttpMethod, RequestContext } = http;
export type { KubernetesObject } from '@kubernetes/client-node';
