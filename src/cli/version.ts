// svcmap version: what is running, for bug reports and for checking a rollout.
// Needs no privileges and never fails for a missing piece: an unknown commit
// or an unloadable libbpf is reported as such, with exit code 0.
import { existsSync, readFileSync } from 'node:fs';
import { release } from 'node:os';
import koffi from 'koffi';
import { native } from '../bpf/native.ts';
import { command, parseFlags } from './args.ts';
import { outputFlag } from './format.ts';
import { readBuildInfo } from './build-info.ts';

/**
 * Where the kernel exposes its own BTF (CONFIG_DEBUG_INFO_BTF). svcmap's
 * programs do not use CO-RE today, but kernel BTF decides what a bug report
 * can inspect (bpftool's BTF dumps) and which later features can load.
 */
export const KERNEL_BTF = '/sys/kernel/btf/vmlinux';

export const versionCommand = command({
  name: 'version',
  summary: "svcmap's version and build, and what it runs on",
  description: `Prints the svcmap version, the commit and time it was built from, the versions of Node and libbpf it runs on, the kernel release, and whether the kernel has BTF (${KERNEL_BTF}).`,
  flags: { output: outputFlag(['table', 'json']) },
});

export interface VersionReport {
  version: string;
  /** null: built without git (or dist/build-info.json is missing). */
  commit: string | null;
  built: string | null;
  node: string;
  /** "1.1"; null when libbpf or the native shim cannot be loaded. */
  libbpf: string | null;
  /** uname -r. */
  kernel: string;
  /** Whether KERNEL_BTF exists. */
  kernelBtf: boolean;
}

/** libbpf's own idea of its version, via the same load the datapath uses. */
function libbpfVersion(): string | null {
  try {
    // native() loads libbpf.so.1 and the shim and checks the shim's ABI: if the
    // datapath could not load, say so rather than name a library it cannot use.
    native();
    // Declared here, not in native.ts: two calls that only this command makes.
    const lib = koffi.load('libbpf.so.1');
    const major = lib.func('uint32_t libbpf_major_version(void)') as () => number;
    const minor = lib.func('uint32_t libbpf_minor_version(void)') as () => number;
    return `${major()}.${minor()}`;
  } catch {
    return null;
  }
}

/** The release and commit this is (the agent's svcmap_build_info says the same); commit "unknown" without build info. */
export function buildIdentity(): { version: string; commit: string } {
  const { version, commit } = releaseAndBuild();
  return { version, commit: commit ?? 'unknown' };
}

function releaseAndBuild(): { version: string; commit: string | null; built: string | null } {
  // Both files sit at fixed places relative to this module, in the repository
  // (src/cli, dist/cli) and in the image (/app/dist/cli) alike.
  const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
  const info = readBuildInfo(new URL('../build-info.json', import.meta.url));
  return { version: pkg.version, commit: info?.commit ?? null, built: info?.built ?? null };
}

export function collectVersion(): VersionReport {
  return {
    ...releaseAndBuild(),
    node: process.version,
    libbpf: libbpfVersion(),
    kernel: release(),
    kernelBtf: existsSync(KERNEL_BTF),
  };
}

/** One fact per line, the name first, so that a bug report can quote the line that matters. */
export function renderVersion(v: VersionReport): string {
  const build = `commit ${v.commit ?? 'unknown'}${v.built ? `, built ${v.built}` : ''}`;
  return (
    [
      `svcmap  ${v.version} (${build})`,
      `node    ${v.node}`,
      `libbpf  ${v.libbpf ?? 'unavailable'}`,
      `kernel  ${v.kernel}, ${v.kernelBtf ? `BTF at ${KERNEL_BTF}` : `no BTF (${KERNEL_BTF} is missing)`}`,
    ].join('\n') + '\n'
  );
}

export function version(argv: string[], out: (s: string) => void): void {
  const f = parseFlags(versionCommand, argv);
  const v = collectVersion();
  out(f.output === 'json' ? `${JSON.stringify(v, null, 2)}\n` : renderVersion(v));
}
