// Public surface of the test API server. See README.md.

export { ApiServer, startApiServer, type ApiServerOptions, type OutageOptions, type RequestFilter, type RestartOptions } from './server.ts';
export { kubeconfigYaml, writeKubeconfig, type KubeconfigOptions } from './kubeconfig.ts';
export {
  endpointSlice,
  node,
  pod,
  service,
  type EndpointSliceOptions,
  type NodeOptions,
  type PodOptions,
  type ServiceOptions,
  type SliceEndpoint,
} from './objects.ts';
export { ApiError, type Status } from './status.ts';
export { RESOURCES, resourceFor, type Resource } from './resources.ts';
export type { RequestRecord } from './router.ts';
export type { CutMode } from './watch.ts';
export type { KubeObject, ObjectMeta, StoredObject, WatchEvent, WatchEventType } from './types.ts';
export { sleep, startServer, waitFor, type Teardown } from './testing.ts';
export { http, rawWatch, type HttpResult, type RawWatch } from './probe.ts';
export {
  kubeConfigFor,
  listFn,
  recordingInformer,
  restartOnError,
  serverState,
  watchPath,
  type InformerOpts,
  type Kind,
  type ListOpts,
  type Recorded,
  type RecordingInformer,
} from './informers.ts';
