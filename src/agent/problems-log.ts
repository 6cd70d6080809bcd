// Reports each problem with an object once while it lasts: a manifest or an
// API object that stays broken is logged when it breaks, not on every sync,
// and its recovery is logged too.
import { formatProblem } from '../model/problems.ts';
import type { Problem } from '../model/types.ts';
import type { Logger } from './log.ts';

function problemId(p: Problem): string {
  return `${p.severity}|${formatProblem(p)}|${p.path}`;
}

export class ProblemReporter {
  /** Problems currently known, by object key. */
  #byObject = new Map<string, Set<string>>();
  readonly #log: Logger;
  readonly #onNew: (p: Problem) => void;

  constructor(log: Logger, onNew: (p: Problem) => void = () => {}) {
    this.#log = log;
    this.#onNew = onNew;
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
