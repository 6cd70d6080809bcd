// Maglev's disruption: the share of flow keys that move to another backend
// when one of 10 backends is removed (ideal: the removed backend's 10%, and
// nothing else). Computed on the agent's own tables (src/sync/maglev.ts) over
// every hash position, so it is exact for the table, not a sample; a
// measurement of the same through the tc datapath (400 flows,
// BPF_PROG_TEST_RUN) is test/bpf/tc-maglev.test.ts's.
import { SVCMAP_MAGLEV_DEFAULT_M } from '../src/maps/constants.ts';
import { maglevDisruption, maglevTable } from '../src/sync/maglev.ts';

export interface MaglevDisruption {
  m: number;
  backends: number;
  /** Share of positions that moved, per removed backend (one row each). */
  moved: number[];
  mean: number;
  max: number;
  /** Mean share of positions that moved although their backend stayed. */
  keptMovedMean: number;
}

export function maglevDisruptionOf(backends = 10, m: number = SVCMAP_MAGLEV_DEFAULT_M): MaglevDisruption {
  const names = Array.from({ length: backends }, (_, i) => `10.244.0.${i + 1}:8080/6`);
  const before = maglevTable(names, m);
  const moved: number[] = [];
  const kept: number[] = [];
  for (let gone = 0; gone < backends; gone++) {
    const after = names.filter((_, i) => i !== gone);
    const share = maglevDisruption(before, names, maglevTable(after, m), after);
    const ownShare = before.filter((i) => i === gone).length / m;
    moved.push(share);
    kept.push(share - ownShare);
  }
  const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
  return { m, backends, moved, mean: mean(moved), max: Math.max(...moved), keptMovedMean: mean(kept) };
}

export function maglevDisruptionLine(d: MaglevDisruption): string {
  return `**Maglev disruption** (M = ${d.m}): removing one of ${d.backends} backends moves ${(d.mean * 100).toFixed(1)}% of the flow keys on average (worst of the ${d.backends}: ${(d.max * 100).toFixed(1)}%; ideal ${(100 / d.backends).toFixed(1)}%), of which ${(d.keptMovedMean * 100).toFixed(1)}% are keys whose backend stayed.`;
}
