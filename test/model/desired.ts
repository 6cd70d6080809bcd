// The tests' oracle: Services + EndpointSlices (+ the agent's node) -> the
// desired state of the maps, from scratch. The agent builds the same state
// incrementally (src/model/incremental.ts); tests and benchmarks hold it to
// this. Pure and deterministic: inputs are sorted first, so the same set of
// objects always gives the same frontends, backends and problems, whatever
// order the informers or the file source delivered them in.

import type { DesiredState, Frontend, NodeInfo, Problem } from '../../src/model/types.ts';
import { isProxied, type Named, objectId, sliceService } from '../../src/model/proxied.ts';
import type { EndpointSlice, Service } from '../../src/model/schemas.ts';
import { ipOrder, type IpSlice, type ModelSlice, modelSlice } from '../../src/model/endpoints.ts';
import { serviceFrontends } from '../../src/model/frontends.ts';
import { keepClaimedFrontends } from '../../src/model/claims.ts';
import { problemAbout } from '../../src/model/problems.ts';

export interface DesiredInput {
  services: readonly Service[];
  slices: readonly EndpointSlice[];
  node?: NodeInfo;
}

/**
 * Sorted by "namespace/name" in plain code-unit order (as the conflict rule is
 * stated); a second object with the same id is reported and dropped.
 */
function sortedUnique<T extends Named & { kind: string }>(objs: readonly T[], problems: Problem[]): T[] {
  const keyed = objs.map((o) => ({ o, key: objectId(o) })).sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  const out: T[] = [];
  let lastKey: string | undefined;
  for (const { o, key } of keyed) {
    if (key === lastKey) {
      problems.push(problemAbout(o, 'error', '', `duplicate ${o.kind} ${key}; the first one is used`));
    } else {
      out.push(o);
      lastKey = key;
    }
  }
  return out;
}

/** The IP slices (both families) of each proxied Service, keyed by namespace/name, reporting slices that cannot be used. */
function indexSlices(
  slices: readonly EndpointSlice[],
  services: ReadonlyMap<string, { proxied: boolean }>,
  problems: Problem[],
): Map<string, ModelSlice[]> {
  const bySvc = new Map<string, ModelSlice[]>();
  for (const slice of slices) {
    const own: Problem[] = [];
    const key = sliceService(slice, own);
    if (key === undefined) {
      problems.push(...own);
      continue;
    }
    const svc = services.get(key);
    if (svc === undefined) {
      problems.push(problemAbout(slice, 'warning', '', `no Service ${key} for this EndpointSlice`));
      continue;
    }
    if (!svc.proxied) continue;
    problems.push(...own);
    const list = bySvc.get(key);
    const kept = modelSlice(slice as IpSlice);
    if (list === undefined) bySvc.set(key, [kept]);
    else list.push(kept);
  }
  return bySvc;
}

/** Order of frontends in the state: IPv4 before IPv6, ip (numerically), port, protocol, external before internal. */
export function sortFrontends(frontends: Iterable<Frontend>): Frontend[] {
  const keyed = [...frontends].map((f) => {
    const rest = (f.protocol === 'TCP' ? 0 : 2) + (f.scope === 'external' ? 0 : 1);
    const at = ipOrder(f.ip, f.port);
    return { f, order: typeof at === 'number' ? at * 4 + rest : `${at}${rest}` };
  });
  // Numbers (IPv4) sort before strings (IPv6).
  return keyed
    .sort((a, b) => {
      const an = typeof a.order === 'number';
      if (an !== (typeof b.order === 'number')) return an ? -1 : 1;
      return a.order < b.order ? -1 : a.order > b.order ? 1 : 0;
    })
    .map((k) => k.f);
}

export function buildDesiredState(input: DesiredInput): { state: DesiredState; problems: Problem[] } {
  const problems: Problem[] = [];
  const services = sortedUnique(input.services, problems);
  const slices = sortedUnique(input.slices, problems);

  const proxied = new Map<string, { svc: Service; proxied: boolean }>();
  for (const svc of services) proxied.set(objectId(svc), { svc, proxied: isProxied(svc, problems) });
  const slicesBySvc = indexSlices(slices, proxied, problems);

  // Services are visited in id order, so the first claimant of a frontend is
  // the one whose namespace/name sorts first.
  const claimed = new Map<string, Frontend>();
  for (const { svc, proxied: isOn } of proxied.values()) {
    if (!isOn) continue;
    const candidates = serviceFrontends(svc, slicesBySvc.get(objectId(svc)) ?? [], input.node, problems);
    const won = keepClaimedFrontends(
      svc,
      candidates,
      (key) => {
        const owner = claimed.get(key);
        return owner && { id: `${owner.service.namespace}/${owner.service.name}`, type: owner.type };
      },
      problems,
    );
    for (const f of won) claimed.set(f.key, f);
  }

  const frontends = new Map<string, Frontend>();
  for (const f of sortFrontends(claimed.values())) frontends.set(f.key, f);
  return { state: { frontends }, problems };
}
