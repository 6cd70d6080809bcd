// Whether an agent runs on a pin directory: a flock(2) on the directory
// itself. The agent takes a shared lock when it starts and holds it for its
// lifetime (the descriptor is close-on-exec, so no child inherits it);
// `svcmap cleanup` asks for an exclusive one without waiting. The kernel
// drops a flock when the last descriptor of its open file goes, so an agent
// that died, even by SIGKILL or OOM, leaves nothing behind that could read
// as "running", as a pid file would (bpffs holds no regular files anyway:
// only directories and pins, and a directory can be flock()ed). The lock is
// on the inode, so it is seen across mount and pid namespaces (the chart's
// cleanup pod and the agent's pod share the host's bpffs). Shared, so that
// two agents on one directory (a restart overlapping its predecessor) both
// hold it.
import { closeSync, fstatSync, mkdirSync, openSync, readFileSync, statSync } from 'node:fs';
import koffi from 'koffi';
import { BpfError, errnoNumber } from './errors.ts';

const LOCK_SH = 1;
const LOCK_EX = 2;
const LOCK_NB = 4;
const EWOULDBLOCK = errnoNumber('EWOULDBLOCK');
const EINTR = errnoNumber('EINTR');

let flockFn: ((fd: number, op: number) => number) | undefined;

/** flock(2): 0, or the errno. Never blocks (LOCK_NB is always added). */
function flock(fd: number, op: number): number {
  flockFn ??= koffi.load('libc.so.6').func('int flock(int fd, int operation)') as (fd: number, op: number) => number;
  for (;;) {
    if (flockFn(fd, op | LOCK_NB) === 0) return 0;
    const errno = koffi.errno();
    if (errno !== EINTR) return errno;
  }
}

/** A lock held through an open descriptor of the directory; release() closes it. */
export interface PinDirLock {
  release(): void;
}

function openDir(dir: string): number {
  return openSync(dir, 'r');
}

/** The same directory still sits at `dir` (a cleanup may have removed it between open and lock). */
function stillThere(fd: number, dir: string): boolean {
  try {
    const [held, now] = [fstatSync(fd, { bigint: true }), statSync(dir, { bigint: true })];
    return held.ino === now.ino && held.dev === now.dev;
  } catch {
    return false;
  }
}

function held(fd: number): PinDirLock {
  let open = true;
  return {
    release() {
      if (open) closeSync(fd);
      open = false;
    },
  };
}

/**
 * The agent's shared lock on pinDir (created if missing), held until
 * release() or the process's end. While a `svcmap cleanup` holds the
 * exclusive lock (for the milliseconds of its removals) this retries, then
 * takes the directory the cleanup left, or a new one in its place.
 */
export function holdPinDir(pinDir: string, timeoutMs = 10_000): PinDirLock {
  const deadline = Date.now() + timeoutMs;
  const pause = new Int32Array(new SharedArrayBuffer(4));
  for (;;) {
    mkdirSync(pinDir, { recursive: true });
    const fd = openDir(pinDir);
    const errno = flock(fd, LOCK_SH);
    if (errno === 0 && stillThere(fd, pinDir)) return held(fd);
    closeSync(fd);
    if (errno !== 0 && errno !== EWOULDBLOCK)
      throw new BpfError(`flock ${pinDir}`, errno, "cannot take the agent's lock on its pin directory");
    if (Date.now() >= deadline)
      throw new Error(`${pinDir} stays locked by a svcmap cleanup (flock held exclusively for more than ${timeoutMs / 1000}s)`);
    Atomics.wait(pause, 0, 0, 50);
  }
}

/** What cleanup finds: the exclusive lock (no agent runs), or the pids that hold the agent's lock (those this pid namespace can see). */
export type CleanupLock = { free: true; lock: PinDirLock } | { free: false; holders: number[] };

/** Tries for the exclusive lock on pinDir, without waiting. */
export function lockForCleanup(pinDir: string): CleanupLock {
  const fd = openDir(pinDir);
  const errno = flock(fd, LOCK_EX);
  if (errno === 0) return { free: true, lock: held(fd) };
  try {
    if (errno !== EWOULDBLOCK) throw new BpfError(`flock ${pinDir}`, errno, 'cannot check whether an agent holds the pin directory');
    return { free: false, holders: flockHolders(fstatSync(fd, { bigint: true })) };
  } finally {
    closeSync(fd);
  }
}

/**
 * Pids holding a flock on the file (/proc/locks: "1: FLOCK ADVISORY READ
 * PID MAJ:MIN:INODE 0 EOF"; the device in hex). Locks of processes outside
 * this pid namespace are not listed there.
 */
export function flockHolders(st: { dev: bigint; ino: bigint }, locks = readLocks()): number[] {
  // glibc's dev_t: major in bits 8-19 and 32-43, minor in bits 0-7 and 20-31.
  const major = ((st.dev >> 8n) & 0xfffn) | ((st.dev >> 32n) & ~0xfffn);
  const minor = (st.dev & 0xffn) | ((st.dev >> 12n) & ~0xffn);
  const pids = new Set<number>();
  for (const line of locks.split('\n')) {
    const m = /^\d+:\s+FLOCK\s+\S+\s+\S+\s+(\d+)\s+([0-9a-f]+):([0-9a-f]+):(\d+)\s/.exec(line);
    if (m && BigInt(`0x${m[2]}`) === major && BigInt(`0x${m[3]}`) === minor && BigInt(m[4]!) === st.ino && m[1] !== '0')
      pids.add(Number(m[1]));
  }
  return [...pids].sort((a, b) => a - b);
}

function readLocks(): string {
  try {
    return readFileSync('/proc/locks', 'utf8');
  } catch {
    return '';
  }
}
