// The svcmap runtime image's root beyond node and /app: the shared libraries
// its ELF files need, taken from a Debian tree that has them installed
// (debootstrap's, or the Dockerfile's stage with libbpf1), and the few files
// of /etc a process expects. Nothing else: no shell, no package manager, no
// coreutils. The buildah recipe (svcmap.ts) and the Dockerfile both run this,
// so the two images have the same files.
//
// The closure starts from every x86-64 program, addon and library under the
// root (node, the shim, koffi's module) and follows DT_NEEDED and PT_INTERP (elf.ts) through
// the tree's library directories. Symbolic links are followed inside the
// tree, never on this machine, and recreated in the image (merged /usr:
// /lib -> usr/lib). Each library's package copyright file comes along.
import {
  chmodSync,
  copyFileSync,
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { join, posix } from 'node:path';
import { EM_X86_64, readElf } from './elf.ts';

/** Where the dynamic loader looks without an ld.so.cache (Debian's multiarch directories first). */
const LIBRARY_DIRS = ['/lib/x86_64-linux-gnu', '/usr/lib/x86_64-linux-gnu', '/lib64', '/lib', '/usr/lib'];

/** The image's users: root, and nonroot (65532), the image's default user. */
const PASSWD = 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n';
const GROUP = 'root:x:0:\nnonroot:x:65532:\n';

const lstat = (p: string) => lstatSync(p, { throwIfNoEntry: false });

/**
 * Resolves path inside tree (links followed within it). With copyTo, also
 * recreates in copyTo every directory and link on the way and copies the file
 * itself. Returns the real path inside the tree, or undefined when absent.
 */
function walk(tree: string, path: string, copyTo?: string, depth = 0): string | undefined {
  if (depth > 40) throw new Error(`${path}: too many levels of symbolic links in ${tree}`);
  const parts = path.split('/').filter(Boolean);
  let cur = '/';
  for (const [i, part] of parts.entries()) {
    const next = posix.join(cur, part);
    const st = lstat(join(tree, next));
    if (!st) return undefined;
    if (st.isSymbolicLink()) {
      const target = readlinkSync(join(tree, next));
      if (copyTo && !lstat(join(copyTo, next))) symlinkSync(target, join(copyTo, next));
      return walk(tree, posix.join(posix.resolve(cur, target), ...parts.slice(i + 1)), copyTo, depth + 1);
    }
    const last = i === parts.length - 1;
    if (copyTo && !existsSync(join(copyTo, next))) {
      if (st.isDirectory()) {
        mkdirSync(join(copyTo, next));
        chmodSync(join(copyTo, next), st.mode & 0o7777);
      } else if (last) {
        copyFileSync(join(tree, next), join(copyTo, next));
        chmodSync(join(copyTo, next), st.mode & 0o7777);
      }
    }
    cur = next;
  }
  return cur;
}

/** Regular files under dir (links not followed), as paths relative to the root. */
function* files(root: string, dir = '/'): Generator<string> {
  for (const e of readdirSync(join(root, dir), { withFileTypes: true })) {
    const p = posix.join(dir, e.name);
    if (e.isDirectory()) yield* files(root, p);
    else if (e.isFile()) yield p;
  }
}

/** The packages of tree's dpkg database that ship path (by any of the names it goes by). */
function owners(tree: string, names: readonly string[]): string[] {
  const info = join(tree, 'var/lib/dpkg/info');
  if (!existsSync(info)) return [];
  const out: string[] = [];
  for (const f of readdirSync(info).filter((n) => n.endsWith('.list'))) {
    const listed = new Set(readFileSync(join(info, f), 'utf8').split('\n'));
    if (names.some((n) => listed.has(n))) out.push(f.slice(0, -'.list'.length).split(':')[0]!);
  }
  return out;
}

export interface RuntimeRoot {
  /** The libraries copied, as their real paths in the image. */
  libraries: string[];
  /** The Debian packages they come from (their copyright files are in /usr/share/doc). */
  packages: string[];
  /** ELF files left out of the closure, with why (builds for another libc or runtime, never loaded here). */
  skipped: string[];
}

/**
 * Completes root (which holds node and /app) into a runtime root: the
 * library closure from tree, /etc/passwd and /etc/group, /tmp.
 */
export function completeRuntimeRoot(tree: string, root: string): RuntimeRoot {
  const libraries = new Set<string>();
  const packages = new Set<string>();
  const skipped: string[] = [];
  const queue: string[] = [];
  for (const f of files(root)) {
    const elf = readElf(join(root, f));
    if (!elf || elf.machine !== EM_X86_64) continue;
    // What node can run or load: programs, addons (.node), libraries (.so); not
    // the other runtimes' prebuilds some packages carry (bare-*'s .bare files).
    if (!elf.interpreter && !/\.(node|so(\.\d+)*)$/.test(f)) {
      skipped.push(`${f} (not a program, addon or library)`);
      continue;
    }
    // koffi ships a musl build beside the glibc one; node (glibc) never loads it.
    if (elf.needed.some((n) => n.startsWith('libc.musl'))) {
      skipped.push(`${f} (musl)`);
      continue;
    }
    queue.push(f);
  }
  const add = (path: string, neededBy: string) => {
    const real = walk(tree, path, root);
    if (!real) throw new Error(`${path} (needed by ${neededBy}) is not in ${tree}: install the Debian package that ships it there`);
    if (libraries.has(real)) return;
    libraries.add(real);
    queue.push(real);
    for (const p of owners(tree, [path, real, real.replace(/^\/usr/, '')])) packages.add(p);
  };
  while (queue.length) {
    const f = queue.shift()!;
    const elf = readElf(join(root, f))!;
    if (elf.interpreter) add(elf.interpreter, f);
    for (const name of elf.needed) {
      const dir = LIBRARY_DIRS.find((d) => walk(tree, posix.join(d, name)));
      if (!dir)
        throw new Error(
          `${name} (needed by ${f}) is in none of ${LIBRARY_DIRS.join(', ')} of ${tree}: install the Debian package that ships it there`,
        );
      add(posix.join(dir, name), f);
    }
  }
  for (const p of packages) walk(tree, `/usr/share/doc/${p}/copyright`, root);

  mkdirSync(join(root, 'etc'), { recursive: true });
  writeFileSync(join(root, 'etc/passwd'), PASSWD);
  writeFileSync(join(root, 'etc/group'), GROUP);
  mkdirSync(join(root, 'tmp'), { recursive: true });
  chmodSync(join(root, 'tmp'), 0o1777);
  return { libraries: [...libraries].sort(), packages: [...packages].sort(), skipped };
}
