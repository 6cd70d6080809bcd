// buildah with storage of its own under .tools/images/buildah (vfs: no
// overlay mounts to leak, works on any file system), never the machine's
// /var/lib/containers. An image is built in one working container made FROM
// scratch: its root is filled as a plain directory (buildah mount), then it
// is configured, committed and pushed to an OCI archive. The working
// container and the committed image are removed afterwards, also on failure
// or abort; the archive is the only output.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { exec } from './exec.ts';
import { IMAGES_DIR, onAbort } from './scratch.ts';

export const STORAGE = [
  '--root',
  join(IMAGES_DIR, 'buildah', 'root'),
  '--runroot',
  join(IMAGES_DIR, 'buildah', 'run'),
  '--storage-driver',
  'vfs',
];

/** The image's configuration (what `buildah config` sets; the Dockerfile's ENV, USER, ...). */
export interface ImageConfig {
  entrypoint: readonly string[];
  cmd?: readonly string[];
  /** In order; PATH included when the image has programs to find. */
  env?: Readonly<Record<string, string>>;
  user?: string;
  workdir?: string;
  /** "8080", "53/udp" */
  ports?: readonly string[];
}

/** The PATH an image gets when nothing else is said (Docker's and the node image's default). */
export const DEFAULT_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

export function buildah(args: readonly string[], timeoutMs = 600_000): Promise<string> {
  return exec('buildah', [...STORAGE, ...args], { timeoutMs });
}

function buildahSync(args: readonly string[]): void {
  spawnSync('buildah', [...STORAGE, ...args], { stdio: 'ignore', timeout: 60_000 });
}

// Working containers carry the builder's pid, so a later build can tell a
// killed build's container from a live one.
const CONTAINER_PREFIX = 'svcmap-img-';
const IMAGE_PREFIX = 'localhost/svcmap-img-build/';

/**
 * Builds an image: fill(root) populates an empty root directory, then the
 * image is configured, committed and written to `archive` under `ref`.
 */
export async function buildImage(opts: {
  name: string;
  ref: string;
  archive: string;
  config: ImageConfig;
  fill: (root: string) => Promise<void>;
  step: <T>(label: string, fn: () => Promise<T>) => Promise<T>;
}): Promise<void> {
  const container = `${CONTAINER_PREFIX}${process.pid}-${opts.name}`;
  const image = `${IMAGE_PREFIX}${opts.name}:${process.pid}`;
  const undo = () => {
    buildahSync(['rm', container]);
    buildahSync(['rmi', '--force', image]);
  };
  undo(); // a leftover of the same name (this pid, an earlier failure in the same process)
  const release = onAbort(undo);
  try {
    await buildah(['from', '--name', container, 'scratch']);
    const root = (await buildah(['mount', container])).trim();
    await opts.fill(root);
    await buildah(['umount', container]);
    await buildah(['config', ...configFlags(opts.config), container]);
    await opts.step('buildah commit', () => buildah(['commit', '--quiet', '--format', 'oci', container, image]));
    await opts.step('buildah push oci-archive', () => buildah(['push', '--quiet', image, `oci-archive:${opts.archive}:${opts.ref}`]));
  } finally {
    release();
    undo();
  }
}

function configFlags(c: ImageConfig): string[] {
  const f = ['--entrypoint', JSON.stringify(c.entrypoint)];
  if (c.cmd) f.push('--cmd', JSON.stringify(c.cmd));
  for (const [k, v] of Object.entries(c.env ?? {})) f.push('--env', `${k}=${v}`);
  if (c.user) f.push('--user', c.user);
  if (c.workdir) f.push('--workingdir', c.workdir);
  for (const p of c.ports ?? []) f.push('--port', p);
  return f;
}

/** True when name carries the pid (group 1 of re) of a process that is gone. */
function orphaned(name: string, re: RegExp): boolean {
  const pid = Number(re.exec(name)?.[1]);
  return pid > 0 && !existsSync(`/proc/${pid}`);
}

/** Removes the working containers and images of builds whose process is gone (killed with SIGKILL). */
export async function sweepBuildah(): Promise<string[]> {
  const list = async (args: string[]) => (await buildah(args)).split('\n').filter(Boolean);
  const containers = (await list(['containers', '--noheading', '--format', '{{.ContainerName}}'])).filter((n) =>
    orphaned(n, new RegExp(`^${CONTAINER_PREFIX}(\\d+)-`)),
  );
  const images = (await list(['images', '--noheading', '--format', '{{.Name}}:{{.Tag}}'])).filter((n) =>
    orphaned(n, new RegExp(`^${IMAGE_PREFIX}[^:]+:(\\d+)$`)),
  );
  for (const c of containers) await buildah(['rm', c]);
  for (const i of images) await buildah(['rmi', '--force', i]);
  return [...containers, ...images];
}

/** A working container made from an OCI archive, for looking at and running an image as it was built. */
export interface ArchiveContainer {
  root: string;
  /** The image's configuration (OCI: User, Env, Entrypoint, Cmd, WorkingDir, ExposedPorts). */
  config: {
    User?: string;
    Env?: string[];
    Entrypoint?: string[];
    Cmd?: string[];
    WorkingDir?: string;
    ExposedPorts?: Record<string, object>;
  };
  /**
   * Runs argv in the container (buildah run, chroot isolation, as the image's
   * user, env and workdir), inside a network namespace of its own that has
   * only loopback: nothing it does reaches this machine's network.
   * Every command run this way prints something: an empty output is taken
   * for buildah's (see runPrinting) and the command is run again. user:
   * another user than the image's ("0": root); caps: capabilities added to
   * buildah's default set (CAP_BPF, ...).
   */
  run(argv: readonly string[], opts?: { timeoutMs?: number; user?: string; caps?: readonly string[] }): Promise<string>;
}

/**
 * Runs f (a command that prints) up to `tries` times while it succeeds with
 * empty output. `buildah run --isolation chroot` relays the command's output
 * through pipes of its own and, on a loaded machine, has returned nothing
 * for a command that exits at once (make e2e, 2026-12-01: `svcmap help` and
 * `coredns -version`, exit 0, empty stdout, while the same commands printed
 * in every other run). A command that fails is not retried.
 */
export async function runPrinting(f: () => Promise<string>, tries = 3): Promise<string> {
  let out = '';
  for (let i = 0; i < tries && out === ''; i++) out = await f();
  return out;
}

/** Imports archive into the builder's storage, runs fn on a container of it, removes both. */
export async function withArchiveContainer<T>(archive: string, label: string, fn: (c: ArchiveContainer) => Promise<T>): Promise<T> {
  // Named like a build's container and image, so the sweep finds them if this process is killed.
  const container = `${CONTAINER_PREFIX}${process.pid}-check-${label}`;
  const image = `${IMAGE_PREFIX}check-${label}:${process.pid}`;
  const undo = () => {
    buildahSync(['rm', container]);
    buildahSync(['rmi', '--force', image]);
  };
  undo();
  const release = onAbort(undo);
  try {
    await buildah(['from', '--quiet', '--pull-never', '--name', container, `oci-archive:${archive}`]);
    const inspect = JSON.parse(await buildah(['inspect', container])) as {
      FromImageID: string;
      FromImage: string;
      OCIv1: { config: ArchiveContainer['config'] };
    };
    // Renamed from the archive's ref to a name the sweep knows.
    await buildah(['tag', inspect.FromImageID, image]);
    await buildah(['rmi', inspect.FromImage]);
    const root = (await buildah(['mount', container])).trim();
    return await fn({
      root,
      config: inspect.OCIv1.config,
      run: (argv, { timeoutMs = 120_000, user, caps = [] }: { timeoutMs?: number; user?: string; caps?: readonly string[] } = {}) =>
        runPrinting(() =>
          exec(
            'unshare',
            [
              '--net',
              '--',
              'sh',
              '-c',
              'ip link set lo up && exec "$@"',
              'sh',
              'buildah',
              ...STORAGE,
              'run',
              '--isolation',
              'chroot',
              ...(user ? ['--user', user] : []),
              ...caps.flatMap((c) => ['--cap-add', c]),
              container,
              '--',
              ...argv,
            ],
            { timeoutMs },
          ),
        ),
    });
  } finally {
    release();
    undo();
  }
}
