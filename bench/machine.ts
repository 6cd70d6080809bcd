// What the numbers were measured on.
import { execFileSync } from 'node:child_process';
import { cpus, loadavg, totalmem } from 'node:os';
import { readFileSync } from 'node:fs';

export interface Machine {
  cpuModel: string;
  vcpus: number;
  memoryGiB: number;
  kernel: string;
  os: string;
  node: string;
  iptables: string;
  nft: string;
  /** 1-minute load average when the bench started (other work on the VM skews numbers). */
  loadavgAtStart: number;
}

function tool(cmd: string, args: string[]): string {
  try {
    return execFileSync(cmd, args, { encoding: 'utf8' }).trim().split('\n')[0] ?? '';
  } catch {
    return 'not installed';
  }
}

export function describeMachine(): Machine {
  let os = 'unknown';
  try {
    os = /^PRETTY_NAME="?([^"\n]*)"?/m.exec(readFileSync('/etc/os-release', 'utf8'))?.[1] ?? os;
  } catch {
    /* keep unknown */
  }
  return {
    cpuModel: cpus()[0]?.model.trim() ?? 'unknown',
    vcpus: cpus().length,
    memoryGiB: Math.round((totalmem() / 2 ** 30) * 10) / 10,
    kernel: readFileSync('/proc/sys/kernel/osrelease', 'utf8').trim(),
    os,
    node: process.version,
    iptables: tool('iptables', ['--version']),
    nft: tool('nft', ['--version']),
    loadavgAtStart: loadavg()[0] ?? 0,
  };
}
