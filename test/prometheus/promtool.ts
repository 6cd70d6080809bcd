// Prometheus' own promtool, built from its Go module by `make promtool`
// into .tools/bin: what the tests under test/prometheus run.
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { ROOT } from '../chart/helm.ts';

export const PROMTOOL = process.env.PROMTOOL ?? join(ROOT, '.tools', 'bin', 'promtool');

export function promtool(...args: string[]): { status: number | null; out: string } {
  const r = spawnSync(PROMTOOL, args, { encoding: 'utf8', cwd: join(ROOT, 'test', 'prometheus'), timeout: 120_000 });
  if (r.error) throw r.error;
  return { status: r.status, out: `${r.stdout}${r.stderr}` };
}
