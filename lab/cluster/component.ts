// One long-running process of the cluster (etcd, kube-apiserver, containerd,
// kubelet, ...): started inside a node's network namespace (and, for node
// processes, its mount namespace) through the lab, so that it dies with the
// run; output appended to a log file of its own; an early exit is reported
// with the last lines of that log.

import type { ChildProcess } from 'node:child_process';
import { closeSync, openSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Lab } from '../lab.ts';
import { hasExited, stopProcess, waitExit } from '../processes.ts';
import { inMountNs } from './mount-ns.ts';

export interface ComponentSpec {
  name: string;
  /** The lab network namespace it runs in. */
  netns: string;
  /** File of the mount namespace it runs in (node processes). */
  mountNs?: string;
  cmd: string;
  args: readonly string[];
  /** A cgroup v2 directory below the lab's (joined before anything runs). */
  cgroup?: string;
  env?: NodeJS.ProcessEnv;
}

export class Component {
  readonly name: string;
  readonly logFile: string;
  readonly child: ChildProcess;
  readonly startedAt = Date.now();

  constructor(lab: Lab, spec: ComponentSpec, logDir: string) {
    this.name = spec.name;
    this.logFile = join(logDir, `${spec.name}.log`);
    const fd = openSync(this.logFile, 'a');
    const [cmd, args] = spec.mountNs
      ? [inMountNs(spec.mountNs)[0] as string, [...inMountNs(spec.mountNs).slice(1), spec.cmd, ...spec.args]]
      : [spec.cmd, [...spec.args]];
    try {
      this.child = lab.spawn(spec.netns, cmd, args, {
        stdio: ['ignore', fd, fd],
        ...(spec.cgroup !== undefined ? { cgroup: spec.cgroup } : {}),
        ...(spec.env !== undefined ? { env: spec.env } : {}),
      });
    } finally {
      closeSync(fd);
    }
  }

  get running(): boolean {
    return !hasExited(this.child);
  }

  /** The last `lines` lines of its log. */
  logTail(lines = 30): string {
    try {
      const all = readFileSync(this.logFile, 'utf8').split('\n');
      return all.slice(-lines - 1).join('\n');
    } catch {
      return '(no log)';
    }
  }

  /**
   * The lines that say why a Go component died: a panic or runtime fatal
   * error, or a klog fatal (F...) or error (E...) line, with what follows
   * the first of them. A Go crash ends in goroutine dumps, so the tail alone
   * rarely holds the cause.
   */
  crashLines(context = 8): string {
    try {
      const all = readFileSync(this.logFile, 'utf8').split('\n');
      const at = all.findIndex((l) => /^(panic: |fatal error: |F\d{4} )/.test(l));
      if (at >= 0) return all.slice(at, at + context).join('\n');
      const errors = all.filter((l) => /^E\d{4} /.test(l));
      return errors.slice(-context).join('\n');
    } catch {
      return '';
    }
  }

  /** Throws with the cause (see crashLines) and the log tail if the process has exited. */
  checkRunning(): void {
    if (this.running) return;
    const how = this.child.signalCode ?? `exit ${this.child.exitCode}`;
    const cause = this.crashLines();
    throw new Error(
      `${this.name} stopped (${how})${cause ? `; the cause, from its log:\n${cause}\n` : ''}; last lines of ${this.logFile}:\n${this.logTail()}`,
    );
  }

  /** SIGTERM, then SIGKILL after graceMs. */
  stop(graceMs = 5000): Promise<void> {
    return stopProcess(this.child, graceMs);
  }

  /** SIGKILL, as a crash would. */
  async kill(): Promise<void> {
    if (!this.running || this.child.pid === undefined) return;
    process.kill(this.child.pid, 'SIGKILL');
    await waitExit(this.child, 5000);
  }
}

/**
 * How long the cluster tests wait for an event that should come (a pod's
 * phase, a reply, the maps agreeing with the API): a safety net only, since
 * a wait ends when the event arrives. Generous, so a CI host busy with other
 * work does not fail a check that would pass (30 s was seen to be tight).
 */
export const EVENT_TIMEOUT_MS = 180_000;

/**
 * Polls probe() every intervalMs until it returns true; throws if it has not
 * within timeoutMs, or as soon as one of the components it depends on stops
 * (alive), or check() throws.
 */
export async function waitUntil(
  what: string,
  probe: () => Promise<boolean> | boolean,
  opts: { timeoutMs: number; intervalMs?: number; alive?: readonly Component[]; check?: () => void },
): Promise<void> {
  const deadline = Date.now() + opts.timeoutMs;
  let lastError = '';
  for (;;) {
    for (const c of opts.alive ?? []) c.checkRunning();
    opts.check?.();
    try {
      if (await probe()) return;
    } catch (e) {
      lastError = (e as Error).message;
    }
    if (Date.now() > deadline)
      throw new Error(
        `timed out after ${opts.timeoutMs / 1000} s waiting for ${what}${lastError ? ` (last error: ${lastError.split('\n')[0]})` : ''}`,
      );
    await new Promise((r) => setTimeout(r, opts.intervalMs ?? 250));
  }
}
