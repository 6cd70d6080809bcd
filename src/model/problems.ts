// Constructors for the Problems the model reports about valid objects (as
// opposed to schema violations, which schemas.ts reports). Messages start with
// the field path, like validation messages, so both read the same in logs.

import type { Problem } from './types.ts';

interface Named {
  kind: string;
  metadata: { namespace?: string; name: string };
}

export function problemAbout(obj: Named, severity: Problem['severity'], path: string, detail: string): Problem {
  return {
    kind: obj.kind,
    namespace: obj.metadata.namespace ?? '',
    name: obj.metadata.name,
    path,
    message: path === '' ? detail : `${path}: ${detail}`,
    severity,
  };
}

/** A frontend another Service (the one sorting first) already holds. */
export function frontendConflict(svc: Named, path: string, detail: string): Problem {
  return { ...problemAbout(svc, 'error', path, detail), conflict: true };
}

/** One line for logs and `svcmap status`: `file.yaml: Service default/web: spec.ports[0].port: ...`. */
export function formatProblem(p: Problem): string {
  const who = [p.kind, p.namespace === '' ? p.name : `${p.namespace}/${p.name}`].filter((s) => s !== '').join(' ');
  return [p.source, who, p.message].filter((s) => s !== undefined && s !== '').join(': ');
}
