// Prometheus text exposition, as kube-proxy's /metrics serves it: histograms
// and plain samples whose series may carry labels (e.g. ip_family="IPv4" on a
// dual-stack kube-proxy), selected by a label filter and summed over the
// series that match. Pure; bench/agent.ts's parseHistogram is the label-less
// special case for svcmap's own metrics.
import type { Histogram } from './agent.ts';

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** Every sample line of a Prometheus text exposition (comments and blank lines skipped). */
export function parseSamples(text: string): Sample[] {
  const out: Sample[] = [];
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)(\s+\S+)?$/.exec(line);
    if (!m) continue;
    const labels: Record<string, string> = {};
    if (m[3]) {
      const re = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;
      let l: RegExpExecArray | null;
      while ((l = re.exec(m[3])) !== null) labels[l[1]!] = l[2]!.replace(/\\(.)/g, (_, c: string) => (c === 'n' ? '\n' : c));
    }
    const v = m[4]!;
    const value = v === '+Inf' ? Infinity : v === '-Inf' ? -Infinity : Number(v);
    out.push({ name: m[1]!, labels, value });
  }
  return out;
}

function matches(labels: Record<string, string>, filter: Record<string, string>): boolean {
  return Object.entries(filter).every(([k, v]) => labels[k] === v);
}

/** The sum of the samples named `name` whose labels include `filter`; undefined when there is none. */
export function sampleValue(samples: readonly Sample[], name: string, filter: Record<string, string> = {}): number | undefined {
  let sum: number | undefined;
  for (const s of samples) if (s.name === name && matches(s.labels, filter)) sum = (sum ?? 0) + s.value;
  return sum;
}

/**
 * A histogram summed over its series that match `filter` (bucket by bucket:
 * what sum by (le) gives in PromQL). Empty (no buckets, count 0) when absent.
 */
export function histogramOf(samples: readonly Sample[], name: string, filter: Record<string, string> = {}): Histogram {
  const buckets = new Map<number, number>();
  let sum = 0;
  let count = 0;
  for (const s of samples) {
    if (!matches(s.labels, filter)) continue;
    if (s.name === `${name}_bucket` && s.labels.le !== undefined) {
      const le = s.labels.le === '+Inf' ? Infinity : Number(s.labels.le);
      buckets.set(le, (buckets.get(le) ?? 0) + s.value);
    } else if (s.name === `${name}_sum`) sum += s.value;
    else if (s.name === `${name}_count`) count += s.value;
  }
  return { buckets: [...buckets.entries()].sort((a, b) => a[0] - b[0]), sum, count };
}
