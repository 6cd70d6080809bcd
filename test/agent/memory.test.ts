// A memory regression check, not a benchmark: the real agent (bin/svcmap)
// with the Kubernetes source, fed 1,000 Services x 10 endpoints by the test
// API server (lab/apiserver), must stay under a resident-set bound once it has
// synced. The bound is what this check measured on 2026-12-01 times 1.5, for
// headroom on a shared VM. Under tap the same probe reads higher than from a
// shell (408-425 MiB against 237-243 MiB on 2026-12-01, same probe, tap's
// NODE_OPTIONS stripped; the cause is not found yet), so the bound is taken
// from the tap runs: 1.5 x 425 MiB. It catches gross regressions only;
// `make bench` has the real figures; nothing here is timed.
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { type ScriptResult, runNodeScript } from '../../lab/processes.ts';

const SERVICES = 1000;
const ENDPOINTS = 10;
/** The highest of five runs under tap on 2026-12-01. */
const MEASURED_MIB = 425;
const BOUND_MIB = Math.round(MEASURED_MIB * 1.5);
const PROBE = fileURLToPath(new URL('./memory-probe.ts', import.meta.url));

function probe(): Promise<ScriptResult> {
  return runNodeScript(PROBE, [String(SERVICES), String(ENDPOINTS)]);
}

t.test(`agent RSS at ${SERVICES} services x ${ENDPOINTS} endpoints stays under ${BOUND_MIB} MiB`, { timeout: 180_000 }, async (t) => {
  const r = await probe();
  t.equal(r.code, 0, `probe exit code 0; stderr tail:\n${r.stderr.slice(-2000)}`);
  if (r.code !== 0) return;
  const m = JSON.parse(r.stdout.trim().split('\n').at(-1)!) as { frontends: number; rssMiB: number };
  t.equal(m.frontends, SERVICES, 'every Service programmed');
  t.comment(`RSS after the first full sync: ${m.rssMiB.toFixed(0)} MiB (bound ${BOUND_MIB} MiB)`);
  t.ok(m.rssMiB <= BOUND_MIB, `RSS ${m.rssMiB.toFixed(0)} MiB <= ${BOUND_MIB} MiB`);
});
