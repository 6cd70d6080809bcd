// Which rule loads are worth attempting: kube-proxy's iptables and nftables
// shapes grow faster than linearly on this kernel and these tools (measured
// here: iptables-restore --noflush and nft -f roughly quadratically; a plain
// iptables-restore near-linearly up to 10k services, then much worse - 100k
// services x 4 endpoints took over 7 minutes), so each operation's time is
// predicted from its largest earlier size (N >= 100) as growing at least
// quadratically (faster if the last two sizes say so), and skipped when the
// prediction is over the budget; a run that overshoots anyway is killed at the
// hard limit and the operation is skipped for larger N.

/** Assumed growth exponent (time ~ N^p) at the least. */
const MIN_GROWTH = 2;

export interface Attempt {
  run: boolean;
  predictedMs?: number;
  reason?: string;
}

export class Budget {
  readonly budgetMs: number;
  readonly hardLimitMs: number;
  readonly #history = new Map<string, Array<[number, number]>>();
  readonly #dead = new Map<string, string>();

  constructor(budgetMs: number, hardLimitMs = Math.max(2 * budgetMs, 60_000)) {
    this.budgetMs = budgetMs;
    this.hardLimitMs = hardLimitMs;
  }

  predict(op: string, n: number): number | undefined {
    const pts = (this.#history.get(op) ?? []).filter(([x]) => x >= 100 && x < n);
    if (pts.length === 0) return undefined;
    const [n2, t2] = pts.at(-1)!;
    let p = MIN_GROWTH;
    if (pts.length >= 2) {
      const [n1, t1] = pts.at(-2)!;
      if (t1 > 0 && t2 > 0 && n2 > n1) p = Math.max(MIN_GROWTH, Math.log(t2 / t1) / Math.log(n2 / n1));
    }
    return t2 * (n / n2) ** p;
  }

  /** Whether to run `op` at size n. */
  attempt(op: string, n: number): Attempt {
    const dead = this.#dead.get(op);
    if (dead) return { run: false, reason: dead };
    const predictedMs = this.predict(op, n);
    if (predictedMs !== undefined && predictedMs > this.budgetMs) {
      return {
        run: false,
        predictedMs,
        reason: `predicted ${fmtDuration(predictedMs)} from smaller N (at least quadratic growth), over the ${fmtDuration(this.budgetMs)} budget`,
      };
    }
    return predictedMs === undefined ? { run: true } : { run: true, predictedMs };
  }

  record(op: string, n: number, ms: number): void {
    const h = this.#history.get(op) ?? [];
    h.push([n, ms]);
    this.#history.set(op, h);
  }

  /** The op overran the hard limit at n: skip it from now on. */
  kill(op: string, n: number): void {
    this.#dead.set(op, `did not finish within ${fmtDuration(this.hardLimitMs)} at N=${n}`);
  }
}

export function fmtDuration(ms: number): string {
  if (ms < 1) return `${(ms * 1000).toFixed(0)} µs`;
  if (ms < 1000) return `${ms.toFixed(ms < 10 ? 2 : ms < 100 ? 1 : 0)} ms`;
  if (ms < 120_000) return `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1)} s`;
  return `${(ms / 60_000).toFixed(1)} min`;
}
