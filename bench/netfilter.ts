// Loading kube-proxy-shaped rules into a lab namespace - never anywhere else:
// every command runs through lab.exec (nsenter --net=/run/netns/<lab ns>),
// which refuses any namespace the lab did not create.
import { join } from 'node:path';
import type { Lab, LabNs } from '../lab/index.ts';
import { iptablesBase, iptablesFull } from './iptables.ts';
import { nftFull } from './nftables.ts';
import { type LineFile, writeLines } from './textfile.ts';
import type { BenchService } from './workload.ts';

export class TimeoutError extends Error {}

export class NetfilterNs {
  readonly lab: Lab;
  readonly ns: LabNs;
  readonly workDir: string;

  constructor(lab: Lab, ns: LabNs, workDir: string) {
    this.lab = lab;
    this.ns = ns;
    this.workDir = workDir;
  }

  file(name: string): string {
    return join(this.workDir, `${this.ns.name}-${name}`);
  }

  /** Runs a command in the namespace; resolves with its wall time in ms. */
  async timed(cmd: string, args: string[], timeoutMs: number): Promise<number> {
    const t0 = performance.now();
    try {
      await this.lab.exec(this.ns, cmd, args, { timeoutMs });
    } catch (err) {
      if ((err as { code?: unknown }).code === 'TIMEOUT') throw new TimeoutError(`${cmd} did not finish within ${timeoutMs} ms`);
      throw err;
    }
    return performance.now() - t0;
  }

  /** Empties every table of the namespace (iptables-nft's tables are nftables tables too). */
  flush(timeoutMs = 600_000): Promise<number> {
    return this.timed('nft', ['flush', 'ruleset'], timeoutMs);
  }

  write(name: string, gen: (out: LineFile) => void): { path: string; lines: number; bytes: number } {
    const path = this.file(name);
    return { path, ...writeLines(path, gen) };
  }

  /** kube-proxy's one-time jumps from the built-in chains. */
  async iptablesSetup(): Promise<void> {
    const f = this.write('base.rules', (o) => iptablesBase(o));
    await this.timed('iptables-restore', [f.path], 30_000);
  }

  /**
   * The whole nat and filter tables replaced in one iptables-restore (no
   * --noflush): the fastest way to get kube-proxy's rules in place.
   */
  async iptablesReplace(services: readonly BenchService[], timeoutMs: number): Promise<number> {
    const f = this.write('replace.rules', (o) => iptablesFull(o, services, [], { jumps: true }));
    return this.timed('iptables-restore', [f.path], timeoutMs);
  }

  /** `iptables-restore --noflush` of a generated file, as kube-proxy runs it. */
  async iptablesNoflush(name: string, gen: (out: LineFile) => void, timeoutMs: number): Promise<number> {
    const f = this.write(name, gen);
    return this.timed('iptables-restore', ['--noflush', f.path], timeoutMs);
  }

  /** nft -f of a generated file. */
  async nft(name: string, gen: (out: LineFile) => void, timeoutMs: number): Promise<number> {
    const f = this.write(name, gen);
    return this.timed('nft', ['-f', f.path], timeoutMs);
  }

  nftFull(services: readonly BenchService[], timeoutMs: number): Promise<number> {
    return this.nft('full.nft', (o) => nftFull(o, services), timeoutMs);
  }
}
