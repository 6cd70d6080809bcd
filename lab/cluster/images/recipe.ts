// What one image is made of and how its root file system is filled. Each
// image has one module (pause.ts, labtool.ts, ...) exporting a Recipe.
import type { ImageConfig } from './buildah.ts';
import type { Input } from './cache.ts';

export type ImageName =
  | 'pause'
  | 'labtool'
  | 'svcmap'
  | 'coredns'
  | 'agnhost'
  | 'jessie-dnsutils'
  | 'regression-issue-74839'
  | 'busybox'
  | 'nginx';

export interface BuildContext {
  /** A scratch directory for intermediate files, removed after the build. */
  scratch: string;
  log: (line: string) => void;
  /** Runs and times one step ("svcmap: npm ci --omit=dev: 12.3s"). */
  step: <T>(label: string, fn: () => Promise<T>) => Promise<T>;
}

export interface Recipe {
  name: ImageName;
  /** The recipe's own module (import.meta.url): how the image is made is an input too. */
  module: string;
  /**
   * Everything the image is made of: a change to any input is a new image.
   * Fails with what to run when an input is missing (make build, make cluster-bins).
   */
  inputs(): Promise<Input[]>;
  /** The name containerd knows the image by after import; key: the hash of the inputs. */
  ref(key: string): Promise<string>;
  config: ImageConfig;
  /** A static program of the image also kept on the host (BuiltImage.binary), to run it outside the cluster. */
  binary?: string;
  /** Fills the image's root (an empty directory). */
  fill(root: string, ctx: BuildContext): Promise<void>;
}
