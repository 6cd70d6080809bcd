// Runs one of the bench's programs inside a lab namespace (optionally in a
// cgroup and on a CPU) to completion, and resolves with its stdout.
import type { Lab, LabNs } from '../lab/index.ts';
import { outputTail } from '../lab/index.ts';

export function runProgram(
  lab: Lab,
  ns: LabNs,
  cmd: string,
  args: string[],
  opts: { cgroup?: string; cpu?: number; timeoutMs: number },
): Promise<string> {
  const child = lab.spawn(ns, cmd, args, {
    stdio: ['ignore', 'pipe', 'pipe'],
    ...(opts.cgroup !== undefined ? { cgroup: opts.cgroup } : {}),
    ...(opts.cpu !== undefined ? { cpu: opts.cpu } : {}),
  });
  let out = '';
  child.stdout!.setEncoding('utf8').on('data', (d: string) => {
    out += d;
  });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${cmd} in ${ns.name}: no result within ${opts.timeoutMs} ms`));
    }, opts.timeoutMs);
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      if (code === 0) resolve(out);
      else reject(new Error(`${cmd} in ${ns.name} exited with ${code ?? signal}: ${outputTail(child).stderr.trim()}`));
    });
  });
}
