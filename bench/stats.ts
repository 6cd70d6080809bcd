// Small statistics helpers (nearest-rank percentiles, medians).

export function percentile(values: readonly number[], q: number): number {
  if (values.length === 0) return Number.NaN;
  const s = [...values].sort((a, b) => a - b);
  const i = Math.min(s.length - 1, Math.max(0, Math.ceil(q * s.length) - 1));
  return s[i]!;
}

export function median(values: readonly number[]): number {
  if (values.length === 0) return Number.NaN;
  const s = [...values].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

/**
 * Median of the ratios a[i] / b[i] over paired samples. The datapath runs
 * every mode once per round, back to back, so a slow phase of the VM (its
 * rates jump between two levels for seconds at a time) hits both sides of a
 * pair; a ratio of the two medians would mix phases and swing by several
 * percent from run to run.
 */
export function pairedMedianRatio(a: readonly number[], b: readonly number[]): number {
  if (a.length !== b.length) throw new Error(`pairedMedianRatio: ${a.length} vs ${b.length} samples`);
  return median(a.map((x, i) => x / b[i]!));
}
