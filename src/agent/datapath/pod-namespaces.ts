// Where the socket terminator finds pods' network namespaces, two ways:
//
// - cgroup: the namespaces of the processes in the cgroup subtree the socket
//   hooks are attached to (the only processes whose sockets the socket LB
//   translates), through /proc/<pid>/ns/net. Opening another user's
//   /proc/<pid>/ns/net is a ptrace access check: in a pod this needs the
//   host's PID namespace (hostPID) and CAP_SYS_PTRACE.
// - netns-dir: the files in a directory where the container runtime pins
//   each pod's namespace by bind-mounting it (containerd and CRI-O:
//   /var/run/netns). Opening those needs neither: they are nsfs files, not
//   processes, so the agent sees them through a read-only hostPath mount.
//
// Each namespace once (by nsfs dev:ino), never the agent's own; opened, to be
// closed by the caller.
import { closeSync, fstatSync, openSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';

export type NamespaceSource = { kind: 'cgroup'; cgroup: string } | { kind: 'netns-dir'; dir: string };

export interface Namespace {
  label: string;
  /** -1: the agent's own. */
  fd: number;
}

/** How the source finds namespaces, for the log. */
export function describeSource(s: NamespaceSource): string {
  return s.kind === 'cgroup'
    ? `the processes in the cgroup ${s.cgroup} (/proc/PID/ns/net)`
    : `the files in ${s.dir} (--netns-dir, the container runtime's pinned namespaces)`;
}

/** A namespace file's identity, `dev:ino`. */
export function netnsId(path: string): string {
  const st = statSync(path);
  return `${st.dev}:${st.ino}`;
}

/** The agent's own network namespace, `dev:ino`. */
export function ownNetnsId(): string {
  return netnsId('/proc/self/ns/net');
}

/** Throws, saying what to do, unless the netns directory can be listed. */
export function checkNetnsDir(dir: string): void {
  try {
    readdirSync(dir);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? (err as Error).message;
    throw new Error(
      `--netns-dir ${dir}: cannot read it (${code}); mount the container runtime's netns directory there (the chart mounts the host's /var/run/netns), or leave the flag out to find pods' namespaces through the processes in the --cgroup subtree (which needs the host's PID namespace and CAP_SYS_PTRACE)`,
    );
  }
}

/** The pods' namespaces of the source, other than `self` (`dev:ino`). */
export function openPodNamespaces(source: NamespaceSource, self: string): Namespace[] {
  return source.kind === 'cgroup' ? openCgroupNamespaces(source.cgroup, self) : openDirNamespaces(source.dir, self);
}

/** Every pid in a cgroup v2 subtree (cgroup.procs of it and of each descendant). */
function cgroupPids(cgroup: string): number[] {
  const out: number[] = [];
  const walk = (dir: string) => {
    let text = '';
    try {
      text = readFileSync(join(dir, 'cgroup.procs'), 'utf8');
    } catch {
      return; // removed meanwhile
    }
    for (const line of text.split('\n')) if (line) out.push(Number(line));
    let entries;
    try {
      entries = readdirSync(dir, { withFileTypes: true });
    } catch {
      return;
    }
    for (const e of entries) if (e.isDirectory()) walk(join(dir, e.name));
  };
  walk(cgroup);
  return out;
}

/** Opens `path` unless its namespace was seen; records it. A file gone meanwhile is skipped. */
function openOnce(path: string, seen: Set<string>, nsfsDev?: number): { fd: number; ino: number } | undefined {
  let fd: number;
  try {
    if (seen.has(netnsId(path))) return undefined;
    fd = openSync(path, 'r');
  } catch {
    return undefined;
  }
  // Checked again on the open file: a pid reused, or a namespace unmounted
  // between the stat and the open (the file left behind is not on nsfs).
  const st = fstatSync(fd);
  const id = `${st.dev}:${st.ino}`;
  if (seen.has(id) || (nsfsDev !== undefined && st.dev !== nsfsDev)) {
    closeSync(fd);
    return undefined;
  }
  seen.add(id);
  return { fd, ino: st.ino };
}

function openCgroupNamespaces(cgroup: string, self: string): Namespace[] {
  const seen = new Set([self]);
  const out: Namespace[] = [];
  for (const pid of cgroupPids(cgroup)) {
    const ns = openOnce(`/proc/${pid}/ns/net`, seen);
    if (ns) out.push({ label: `net:[${ns.ino}] (pid ${pid})`, fd: ns.fd });
  }
  return out;
}

/**
 * The namespace files in `dir`: only files on nsfs (the device of the
 * agent's own /proc/self/ns/net), so the empty file a runtime creates before
 * it bind-mounts the namespace there, or one left after an unmount, is
 * skipped.
 */
function openDirNamespaces(dir: string, self: string): Namespace[] {
  const nsfsDev = statSync('/proc/self/ns/net').dev;
  const seen = new Set([self]);
  const out: Namespace[] = [];
  // Checked at start; an error here (the mount gone since) is the caller's to report.
  for (const name of readdirSync(dir).sort()) {
    const path = join(dir, name);
    const ns = openOnce(path, seen, nsfsDev); // skips what is not on nsfs, or gone meanwhile
    if (ns) out.push({ label: `net:[${ns.ino}] (${path})`, fd: ns.fd });
  }
  return out;
}
