// Reports each problem with an object once while it lasts: a manifest or an
// API object that stays broken is logged when it breaks, not on every sync,
// and its recovery is logged too.
import { formatProblem } from '../../model/problems.ts';
import type { Problem } from '../../model/types.ts';
import type { Logger } from '../log.ts';
import type { AgentMetrics } from '../http/metrics.ts';

function problemId(p: Problem): string {
  return `${p.severity}|${formatProblem(p)}|${p.path}`;
}

/** The svcmap_sync_errors_total kind a newly reported problem counts as (warnings count as none). */
export function syncErrorKind(p: Problem): 'invalid_object' | 'frontend_conflict' | 'annotation_value' | undefined {
  // A Service annotation svcmap does not accept (svcmap.io/lb-algorithm, ...): used with the default, but counted.
  if (p.path.startsWith('metadata.annotations[') && !p.reason) return 'annotation_value';
  if (p.severity !== 'error') return undefined;
  return p.conflict ? 'frontend_conflict' : 'invalid_object';
}

export class ProblemReporter {
  /** Problems currently known, by object key. */
  #byObject = new Map<string, Set<string>>();
  readonly #log: Logger;
  readonly #onNew: (p: Problem) => void;
  readonly #onSeen: (problems: readonly Problem[]) => void;

  /**
   * onNew: each problem when it first appears (logs and counters, once).
   * onSeen: every report of an object's problems, repeats included (the
   * Kubernetes Events, whose series count how often a problem was seen).
   */
  constructor(log: Logger, onNew: (p: Problem) => void = () => {}, onSeen: (problems: readonly Problem[]) => void = () => {}) {
    this.#log = log;
    this.#onNew = onNew;
    this.#onSeen = onSeen;
  }

  #emit(p: Problem): void {
    const text = formatProblem(p);
    const fields = { kind: p.kind, namespace: p.namespace, name: p.name, field: p.path, source: p.source };
    if (p.severity === 'error') this.#log.error(fields, `skipped: ${text}${p.path && !text.includes(p.path) ? ` (${p.path})` : ''}`);
    else this.#log.warn(fields, text);
    this.#onNew(p);
  }

  /** Replaces what is known about one object (key e.g. "Service ns/name"); [] means it is fine now. */
  reportObject(key: string, problems: readonly Problem[]): void {
    const before = this.#byObject.get(key) ?? new Set<string>();
    const now = new Set<string>();
    for (const p of problems) {
      const id = problemId(p);
      now.add(id);
      if (!before.has(id)) this.#emit(p);
    }
    if (before.size > 0 && now.size === 0) this.#log.info({ object: key }, 'problems resolved');
    if (now.size) this.#byObject.set(key, now);
    else this.#byObject.delete(key);
    if (problems.length) this.#onSeen(problems);
  }

  /** The whole set of problems at once (the file source): grouped by object. */
  report(problems: readonly Problem[]): void {
    const grouped = new Map<string, Problem[]>();
    for (const p of problems) {
      const key = `${p.kind} ${p.namespace}/${p.name} ${p.source ?? ''}`;
      const list = grouped.get(key);
      if (list) list.push(p);
      else grouped.set(key, [p]);
    }
    for (const key of [...this.#byObject.keys()]) if (!grouped.has(key)) this.reportObject(key, []);
    for (const [key, list] of grouped) this.reportObject(key, list);
  }
}

/** The agent's reporter: each new problem is logged and counted in svcmap_sync_errors_total by its kind; onSeen as ProblemReporter's. */
export function countingProblemReporter(
  log: Logger,
  metrics: AgentMetrics,
  onSeen?: (problems: readonly Problem[]) => void,
): ProblemReporter {
  return new ProblemReporter(
    log,
    (p) => {
      const kind = syncErrorKind(p);
      if (kind) metrics.syncErrors.inc({ kind });
    },
    onSeen,
  );
}
