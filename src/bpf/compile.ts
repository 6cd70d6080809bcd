// The one way a BPF object is built: clang with fixed flags, the project's
// include paths and per-node -D feature switches, cached by a hash of the
// sources and flags. `make` calls this through `svcmap compile`, the image
// ships its output, and the agent compiles at start only when asked to or
// when no cached object matches.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { packageRoot } from './native.ts';
import { TEST_LAYOUT_DEFINES, testLayout } from './test-layout.ts';

/** The entry files in bpf/: one per attach point (veth: the pods' veths; sock_destroy: the socket iterators that end stale sockets; sock_count: the socket storage iterator that recounts the socket LB's connections). */
export const BPF_PROGRAMS = ['sock', 'tc', 'veth', 'xdp', 'sock_destroy', 'sock_count'] as const;
export type BpfProgramName = (typeof BPF_PROGRAMS)[number];

export interface CompileRequest {
  program: BpfProgramName;
  /** Per-node feature switches, passed as -DNAME=VALUE. */
  defines?: Record<string, string | number>;
  /** Where objects are cached (default: build/bpf under the package root). */
  outDir?: string;
  /** Compile even when a cached object matches. */
  force?: boolean;
  clang?: string;
}

export interface CompiledObject {
  path: string;
  hash: string;
  cached: boolean;
}

/** clang's flags for every object (-mcpu=v3: rr needs the value __sync_fetch_and_add returns). */
export const BPF_CFLAGS: readonly string[] = ['-O2', '-g', '-target', 'bpf', '-mcpu=v3', '-Wall', '-Werror', '-Wno-unused-function'];

export function bpfSourceDir(): string {
  return join(packageRoot(), 'bpf');
}

export function defaultObjectDir(): string {
  return join(packageRoot(), 'build', 'bpf');
}

function defineFlags(defines: Record<string, string | number> = {}): string[] {
  return Object.keys(defines)
    .sort()
    .map((k) => {
      if (!/^[A-Z_][A-Z0-9_]*$/.test(k)) throw new Error(`invalid BPF feature switch name ${JSON.stringify(k)}`);
      return `-D${k}=${defines[k]}`;
    });
}

/** Every file the compile reads from bpf/: the entry file and all headers. */
function sourceFiles(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string) => {
    for (const e of readdirSync(d, { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name))) {
      const p = join(d, e.name);
      if (e.isDirectory()) walk(p);
      else if (/\.(c|h)$/.test(e.name)) out.push(p);
    }
  };
  walk(dir);
  return out;
}

/**
 * The cache key: the flags plus the content of every source file. It does
 * not include the clang version, so the runtime image (which has no clang)
 * can find the object the build stage made for the same sources.
 */
export function objectHash(program: BpfProgramName, defines?: Record<string, string | number>): string {
  const dir = bpfSourceDir();
  const h = createHash('sha256');
  h.update(JSON.stringify({ program, flags: BPF_CFLAGS, defines: defineFlags(defines) }));
  for (const f of sourceFiles(dir)) {
    h.update(relative(dir, f));
    h.update('\0');
    h.update(readFileSync(f));
    h.update('\0');
  }
  return h.digest('hex').slice(0, 16);
}

export function objectPath(program: BpfProgramName, hash: string, outDir = defaultObjectDir()): string {
  return join(outDir, `${program}-${hash}.o`);
}

function multiarchInclude(): string[] {
  const triple = { x64: 'x86_64-linux-gnu', arm64: 'aarch64-linux-gnu' }[process.arch as string];
  const dir = triple ? `/usr/include/${triple}` : undefined;
  return dir && existsSync(dir) ? ['-I', dir] : [];
}

/** Returns the cached object for these sources and flags, compiling it if needed. */
export function compileBpf(request: CompileRequest): CompiledObject {
  // A process running the test layout (test-layout.ts) builds and finds its own objects.
  const req = testLayout() ? { ...request, defines: { ...TEST_LAYOUT_DEFINES, ...request.defines } } : request;
  const outDir = req.outDir ?? defaultObjectDir();
  const hash = objectHash(req.program, req.defines);
  const path = objectPath(req.program, hash, outDir);
  if (!req.force && existsSync(path)) return { path, hash, cached: true };

  const dir = bpfSourceDir();
  const clang = req.clang ?? process.env.CLANG ?? 'clang';
  mkdirSync(outDir, { recursive: true });
  const tmp = `${path}.${process.pid}.tmp`;
  const args = [
    ...BPF_CFLAGS,
    ...defineFlags(req.defines),
    '-I',
    join(dir, 'include'),
    '-I',
    join(dir, 'lib'),
    ...multiarchInclude(),
    '-c',
    join(dir, `${req.program}.c`),
    '-o',
    tmp,
  ];
  try {
    execFileSync(clang, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  } catch (err) {
    rmSync(tmp, { force: true });
    const e = err as { code?: string; stderr?: Buffer };
    if (e.code === 'ENOENT') {
      throw new Error(
        `cannot compile bpf/${req.program}.c: ${clang} is not installed (apt-get install clang llvm libbpf-dev), and no prebuilt object matches at ${path}`,
      );
    }
    throw new Error(`clang failed on bpf/${req.program}.c:\n${e.stderr?.toString() ?? String(err)}`);
  }
  renameSync(tmp, path); // atomic: a concurrent reader sees the old object or the whole new one
  writeFileSync(join(outDir, `${req.program}.latest`), `${hash}\n`);
  return { path, hash, cached: false };
}
