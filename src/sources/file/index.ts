// The file source: manifests on disk -> validated objects -> desired state.
export { loadManifestDir, isManifestName, type LoadedObject, type LoadResult } from './load.ts';
export { parseManifest, flattenLists } from './parse.ts';
export { watchManifestDir, type DirWatch, type WatchOptions } from './watch.ts';
export { FileSource, type FileSourceOptions, type StateListener } from './file-source.ts';
