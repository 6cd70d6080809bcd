// Reports each problem with an object once while it lasts: a manifest that
// stays broken is logged when it breaks, not again on every reload.
import { formatProblem } from '../model/problems.ts';
import type { Problem } from '../model/types.ts';
import type { Logger } from './log.ts';

export class ProblemReporter {
  #seen = new Set<string>();
  readonly #log: Logger;
  constructor(log: Logger) {
    this.#log = log;
  }
  report(problems: readonly Problem[]): void {
    const now = new Set<string>();
    for (const p of problems) {
      const text = formatProblem(p);
      const id = `${p.severity}|${text}|${p.path}`;
      now.add(id);
      if (this.#seen.has(id)) continue;
      const fields = { kind: p.kind, namespace: p.namespace, name: p.name, field: p.path, source: p.source };
      if (p.severity === 'error') this.#log.error(fields, `skipped: ${text}${p.path && !text.includes(p.path) ? ` (${p.path})` : ''}`);
      else this.#log.warn(fields, text);
    }
    for (const id of this.#seen) {
      if (!now.has(id)) this.#log.info({ problem: id.split('|')[1] }, 'problem resolved');
    }
    this.#seen = now;
  }
}
