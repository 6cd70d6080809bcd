// Whether a Service's frontends changed, field by field. Compared once per
// recomputed Service; JSON.stringify of both sides cost ~190 ms of a full
// recomputation at 10k Services x 10 endpoints, this a few ms. A field added
// to Frontend or Backend must be compared here: test/model/same.test.ts
// lists every field (the compiler checks the list is whole) and changes each.
import type { Backend, Frontend } from './types.ts';

function sameBackend(a: Backend, b: Backend): boolean {
  return (
    a.ip === b.ip &&
    a.port === b.port &&
    a.protocol === b.protocol &&
    a.state === b.state &&
    a.nodeName === b.nodeName &&
    a.zone === b.zone &&
    a.local === b.local
  );
}

function sameList<T>(a: readonly T[], b: readonly T[], same: (x: T, y: T) => boolean): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (!same(a[i]!, b[i]!)) return false;
  return true;
}

export function sameFrontend(a: Frontend, b: Frontend): boolean {
  return (
    a.key === b.key &&
    a.ip === b.ip &&
    a.port === b.port &&
    a.protocol === b.protocol &&
    a.scope === b.scope &&
    a.type === b.type &&
    a.service.namespace === b.service.namespace &&
    a.service.name === b.service.name &&
    a.service.portName === b.service.portName &&
    a.service.kind === b.service.kind &&
    a.externalLocal === b.externalLocal &&
    a.internalLocal === b.internalLocal &&
    a.wildcard === b.wildcard &&
    a.twoScopes === b.twoScopes &&
    a.algorithm === b.algorithm &&
    a.sourceHashPort === b.sourceHashPort &&
    a.maglevTableSize === b.maglevTableSize &&
    a.lbMode === b.lbMode &&
    a.affinityTimeoutSeconds === b.affinityTimeoutSeconds &&
    a.healthCheckNodePort === b.healthCheckNodePort &&
    sameList(a.sourceRanges, b.sourceRanges, Object.is) &&
    sameList(a.backends, b.backends, sameBackend)
  );
}

/** The same frontends in the same order (absent counts as none). */
export function sameFrontends(a: readonly Frontend[] | undefined, b: readonly Frontend[]): boolean {
  return sameList(a ?? [], b, sameFrontend);
}
