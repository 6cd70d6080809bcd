// What client-node's config.js imports from its generated ./gen/index.js (see
// client-node.ts): the same two functions, from the same package, without the
// generated API and model classes that index re-exports.
export { createConfiguration } from '@kubernetes/client-node/dist/gen/configuration.js';
export { ServerConfiguration } from '@kubernetes/client-node/dist/gen/servers.js';
