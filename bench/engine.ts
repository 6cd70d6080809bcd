// The sync engine in-process, against real BPF maps: the sock object is
// loaded with its maps pinned in a directory of the bench's own (nothing is
// attached anywhere), and src/model + src/sync program it exactly as the
// agent would, minus the source (no YAML, no informers). This isolates what
// the engine costs from what reading the objects costs.
import { mkdirSync } from 'node:fs';
import { compileBpf } from '../src/bpf/compile.ts';
import { loadPinned } from '../src/bpf/loader.ts';
import { cleanupPins } from '../src/cli/cleanup.ts';
import { SVCMAP_MAP_BACKENDS, SVCMAP_MAP_REVNAT, SVCMAP_MAP_SERVICES } from '../src/maps/constants.ts';
import { DatapathMaps } from '../src/maps/datapath-maps.ts';
import { buildDesiredState } from '../test/model/desired.ts';
import { type EndpointSlice, type Service } from '../src/model/schemas.ts';
import { validateObject } from '../src/model/validate.ts';
import { MapsAdapter } from '../src/sync/maps-adapter.ts';
import { Syncer } from '../src/sync/syncer.ts';
import type { FrontendTarget } from '../src/sync/targets.ts';
import { toTargets } from '../src/agent/loops/targets.ts';
import { serviceObject, sliceObject } from './manifests.ts';
import { median, percentile } from './stats.ts';
import { type BenchService, withChangedEndpoint } from './workload.ts';

export interface EngineResult {
  n: number;
  endpointsPerService: number;
  /** zod validation of 2N objects, ms. */
  validateMs: number;
  /** buildDesiredState + toTargets for all N, ms. */
  modelMs: number;
  /** Syncer.sync from empty maps: plan + batched writes, ms. */
  fullSyncMs: number;
  /** Entries written (services, backends, revNat). */
  entries: { services: number; backends: number; revNat: number };
  /** One endpoint change as the Kubernetes source applies it: a partial sync of one Service (model + plan + writes). */
  changePartialMs: { p50: number; p99: number; reps: number };
  /** One endpoint change as the file source applies it: a full plan over all N (writes only what changed), sync only. */
  changeFullMs: { p50: number; reps: number };
}

function validated<T>(raw: unknown): T {
  const r = validateObject(raw, 'bench');
  if (!r.ok) throw new Error(`bench object invalid: ${JSON.stringify(r.problems)}`);
  return r.obj as T;
}

function modelOf(services: readonly BenchService[]): { svcs: Service[]; slices: EndpointSlice[] } {
  return {
    svcs: services.map((s) => validated<Service>(serviceObject(s))),
    slices: services.map((s) => validated<EndpointSlice>(sliceObject(s))),
  };
}

function targetsOf(svcs: readonly Service[], slices: readonly EndpointSlice[]): FrontendTarget[] {
  return toTargets(buildDesiredState({ services: svcs, slices }).state);
}

export interface EngineOptions {
  pinDir: string;
  services: readonly BenchService[];
  endpointsPerService: number;
  partialReps: number;
  fullReps: number;
}

export function runEngine(o: EngineOptions): EngineResult {
  const n = o.services.length;
  const obj = compileBpf({ program: 'sock' });
  mkdirSync(o.pinDir, { recursive: true });
  const svcEntries = Math.ceil(n * (1 + o.endpointsPerService) * 1.05) + 1024;
  const beEntries = Math.ceil(n * o.endpointsPerService * 1.05) + 1024;
  const sizes = new Map([
    [SVCMAP_MAP_SERVICES, svcEntries],
    [SVCMAP_MAP_BACKENDS, beEntries],
    [SVCMAP_MAP_REVNAT, n + 1024],
  ]);
  const loaded = loadPinned({ objectPath: obj.path, pinDir: o.pinDir, maxEntries: (name) => sizes.get(name) });
  let maps: DatapathMaps | undefined;
  try {
    maps = DatapathMaps.openPinned(o.pinDir);
    const syncer = new Syncer(new MapsAdapter(maps.v4));

    let t = performance.now();
    const { svcs, slices } = modelOf(o.services);
    const validateMs = performance.now() - t;
    t = performance.now();
    const targets = targetsOf(svcs, slices);
    const modelMs = performance.now() - t;
    if (targets.length !== n) throw new Error(`engine: ${targets.length} frontends for ${n} services`);

    t = performance.now();
    const full = syncer.sync(targets);
    const fullSyncMs = performance.now() - t;
    if (full.deferred.length) throw new Error(`engine: ${full.deferred.length} frontends deferred (maps too small)`);

    // One endpoint change, the Kubernetes way: only that Service's frontends.
    const current = [...o.services];
    const partial: number[] = [];
    let change = 1_000_000;
    for (let r = 0; r < o.partialReps; r++) {
      const i = (r * 7919) % n;
      const next = withChangedEndpoint(current[i]!, change++);
      const t0 = performance.now();
      const tg = targetsOf([validated<Service>(serviceObject(next))], [validated<EndpointSlice>(sliceObject(next))]);
      syncer.syncOwners(new Map([[tg[0]!.owner, tg]]));
      partial.push(performance.now() - t0);
      current[i] = next;
      svcs[i] = validated<Service>(serviceObject(next));
      slices[i] = validated<EndpointSlice>(sliceObject(next));
    }

    // One endpoint change, the file source's way: the full desired state, planned against everything.
    const fullChange: number[] = [];
    for (let r = 0; r < o.fullReps; r++) {
      const i = n - 1 - ((r * 104729) % n);
      const next = withChangedEndpoint(current[i]!, change++);
      current[i] = next;
      slices[i] = validated<EndpointSlice>(sliceObject(next));
      const tg = targetsOf(svcs, slices);
      const t0 = performance.now();
      syncer.sync(tg);
      fullChange.push(performance.now() - t0);
    }
    const e = syncer.state.counts;
    return {
      n,
      endpointsPerService: o.endpointsPerService,
      validateMs,
      modelMs,
      fullSyncMs,
      entries: { services: e.services, backends: e.backends, revNat: e.revNat },
      changePartialMs: { p50: median(partial), p99: percentile(partial, 0.99), reps: partial.length },
      changeFullMs: { p50: median(fullChange), reps: fullChange.length },
    };
  } finally {
    maps?.close();
    loaded.object.close();
    cleanupPins(o.pinDir);
  }
}
