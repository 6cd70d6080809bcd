// Who keeps a frontend that several Services claim, stated once for the full
// model (the tests' oracle, test/model/desired.ts) and the incremental one (incremental.ts), which a
// property test holds equal: the Service whose namespace/name sorts first.
// The callers differ only in how they know that owner.
import type { SourcedFrontend } from './frontends.ts';
import { frontendConflict, problemAbout } from './problems.ts';
import type { Frontend, FrontendType, Problem } from './types.ts';

/** The Service holding an external frontend key: its namespace/name, and the type of its frontend when known. */
export interface FrontendOwner {
  id: string;
  type?: FrontendType;
}

type Named = { kind: string; metadata: { namespace: string; name: string } };

/**
 * The frontends `svc` keeps of its candidates (serviceFrontends' output, in
 * order). An external frontend another Service owns (ownerOf; undefined when
 * free or `svc`'s own) is skipped with a FrontendConflict; one `svc` lists
 * twice (a LoadBalancer ingress IP also in externalIPs) is kept once, with
 * a warning; an internal twin stands or falls with the external entry just
 * before it.
 */
export function keepClaimedFrontends(
  svc: Named,
  candidates: readonly SourcedFrontend[],
  ownerOf: (key: string) => FrontendOwner | undefined,
  problems: Problem[],
): Frontend[] {
  const out: Frontend[] = [];
  const mine = new Map<string, Frontend>();
  let lastAccepted: string | undefined;
  for (const { frontend, path } of candidates) {
    if (frontend.scope === 'internal') {
      if (lastAccepted !== undefined && frontend.key === `${lastAccepted}/internal`) out.push(frontend);
      continue;
    }
    lastAccepted = undefined;
    const dup = mine.get(frontend.key);
    if (dup) {
      problems.push(
        problemAbout(
          svc,
          'warning',
          path,
          `frontend ${frontend.key} (${frontend.type}) duplicates this Service's ${dup.type} frontend; kept the ${dup.type} one`,
        ),
      );
      continue;
    }
    const owner = ownerOf(frontend.key);
    if (owner) {
      problems.push(
        frontendConflict(
          svc,
          path,
          `frontend ${frontend.key} (${frontend.type}) is already used by Service ${owner.id}${owner.type ? ` (${owner.type})` : ''}; this frontend is skipped`,
        ),
      );
      continue;
    }
    mine.set(frontend.key, frontend);
    out.push(frontend);
    lastAccepted = frontend.key;
  }
  return out;
}
