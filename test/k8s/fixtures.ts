// The Kubernetes sync path as the agent composes it (informers -> incremental
// model -> bounded-frequency loop -> syncer), over real BPF maps loaded from
// the compiled objects into a pin directory of the test's own, with every
// map write also applied element by element to an in-memory mirror so that
// every intermediate state a datapath reader could see is checked.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { KubeConfig } from '@kubernetes/client-node';
import { pino } from 'pino';
import { claimPinDir, ensureBpffs } from '../../lab/pins.ts';
import { compileBpf } from '../../src/bpf/compile.ts';
import { loadPinned } from '../../src/bpf/loader.ts';
import type { BpfObject } from '../../src/bpf/object.ts';
import { buildDumpView } from '../../src/cli/dump-view.ts';
import { SyncLoop } from '../../src/agent/loops/sync-loop.ts';
import { AgentMetrics } from '../../src/agent/http/metrics.ts';
import { countingProblemReporter } from '../../src/agent/loops/problems-log.ts';
import { SyncStatus } from '../../src/agent/loops/sync-status.ts';
import type { BackendValue, RevNatValue, SrcRangeKey, SvcKey, SvcValue } from '../../src/maps/codecs.ts';
import { DatapathMaps } from '../../src/maps/datapath-maps.ts';
import type { Problem } from '../../src/model/types.ts';
import { KubernetesSource } from '../../src/sources/kubernetes/source.ts';
import type { MapWriter } from '../../src/sync/apply.ts';
import { MapsAdapter } from '../../src/sync/maps-adapter.ts';
import type { Capacity, SlotWrite } from '../../src/sync/plan.ts';
import type { MapState } from '../../src/sync/state.ts';
import { type MapSource, type SyncReport, Syncer } from '../../src/sync/syncer.ts';
import type { FrontendTarget } from '../../src/sync/targets.ts';
import { MemoryMaps } from '../sync/helpers.ts';

export interface Violation {
  sync: number;
  after: string;
  problem: string;
}

/** Forwards every write to the real maps, and mirrors it element by element. */
class Recorder implements MapSource, MapWriter {
  readonly real: MapsAdapter;
  readonly mirror = new MemoryMaps();
  constructor(real: MapsAdapter) {
    this.real = real;
    const s = real.maps;
    for (const [k, v] of s.services.entries()) this.mirror.services.set(`${k.addr}:${k.port}/${k.proto}/${k.scope}#${k.slot}`, [k, v]);
    for (const [k, v] of s.backends.entries()) this.mirror.backends.set(k, v);
    for (const [k, v] of s.revNat.entries()) this.mirror.revNat.set(k, v);
  }
  readState(): MapState {
    return this.real.readState();
  }
  capacity(): Capacity {
    return this.real.capacity();
  }
  lookupServices(keys: readonly SvcKey[]) {
    return this.real.lookupServices(keys);
  }
  lookupBackends(ids: readonly number[]) {
    return this.real.lookupBackends(ids);
  }
  lookupRevNat(ids: readonly number[]) {
    return this.real.lookupRevNat(ids);
  }
  readSrcRanges() {
    return this.real.readSrcRanges();
  }
  putBackends(e: ReadonlyArray<readonly [number, BackendValue]>) {
    this.real.putBackends(e);
    this.mirror.putBackends(e);
  }
  putRevNat(e: ReadonlyArray<readonly [number, RevNatValue]>) {
    this.real.putRevNat(e);
    this.mirror.putRevNat(e);
  }
  putServices(e: ReadonlyArray<readonly [SvcKey, SvcValue]>) {
    this.real.putServices(e);
    this.mirror.putServices(e);
  }
  putSlots(s: readonly SlotWrite[]) {
    this.real.putSlots(s);
    this.mirror.putSlots(s);
  }
  putSrcRanges(k: readonly SrcRangeKey[]) {
    this.real.putSrcRanges(k);
    this.mirror.putSrcRanges(k);
  }
  deleteSrcRanges(k: readonly SrcRangeKey[]) {
    this.real.deleteSrcRanges(k);
    this.mirror.deleteSrcRanges(k);
  }
  deleteServices(k: readonly SvcKey[]) {
    this.real.deleteServices(k);
    this.mirror.deleteServices(k);
  }
  deleteRevNat(ids: readonly number[]) {
    this.real.deleteRevNat(ids);
    this.mirror.deleteRevNat(ids);
  }
  deleteBackends(ids: readonly number[]) {
    this.real.deleteBackends(ids);
    this.mirror.deleteBackends(ids);
  }
}

const counts = (m: Map<string, string[] | string>) => new Map([...m].map(([k, v]) => [k, typeof v === 'string' ? -1 : v.length]));

/** A Syncer that checks, around each sync, that no reader could see fewer backends than before and after it. */
class CheckedSyncer extends Syncer {
  readonly violations: Violation[] = [];
  syncs = 0;
  readonly #rec: Recorder;
  constructor(rec: Recorder) {
    super(rec);
    this.#rec = rec;
  }
  #checked(run: () => SyncReport): SyncReport {
    const n = ++this.syncs;
    const before = counts(this.#rec.mirror.resolve());
    const seen: Array<{ after: string; state: Map<string, string[] | string> }> = [];
    this.#rec.mirror.onWrite = (after) => seen.push({ after, state: this.#rec.mirror.resolve() });
    try {
      return run();
    } finally {
      this.#rec.mirror.onWrite = () => {};
      const after = counts(this.#rec.mirror.resolve());
      for (const { after: what, state } of seen) {
        for (const [fid, res] of state) {
          if (typeof res === 'string') {
            this.violations.push({ sync: n, after: what, problem: res });
            continue;
          }
          const floor = Math.min(before.get(fid) ?? Infinity, after.get(fid) ?? Infinity);
          if (floor !== Infinity && res.length < floor) {
            this.violations.push({
              sync: n,
              after: what,
              problem: `${fid} had ${res.length} backends (before ${before.get(fid)}, after ${after.get(fid)})`,
            });
          }
        }
      }
    }
  }
  override sync(targets: readonly FrontendTarget[]): SyncReport {
    return this.#checked(() => super.sync(targets));
  }
  override syncOwners(changes: ReadonlyMap<string, readonly FrontendTarget[]>): SyncReport {
    return this.#checked(() => super.syncOwners(changes));
  }
}

export interface SyncHarness {
  syncer: CheckedSyncer;
  source: KubernetesSource;
  metrics: AgentMetrics;
  status: SyncStatus;
  /** Problems of objects that failed validation, as the agent's problem reporter gets them (repeats included). */
  invalid: Problem[];
  informerErrors: string[];
  /** Frontend -> sorted "addr:port state" of its backends, decoded from the real maps. */
  frontends(): Map<string, string[]>;
  stop(): void;
}

export function startSync(kc: KubeConfig, nodeName = 'node1'): SyncHarness {
  // A lab-named pin directory under a claimed run id: swept (lab/sweep.ts, the
  // next run) if this process is killed, removed on exit or a signal otherwise.
  // Without bpffs at /sys/fs/bpf, creating the pin directory fails with
  // ENOENT, on which mkdirSync({ recursive: true }) spins forever.
  ensureBpffs();
  const pins = claimPinDir('k8s');
  const pinDir = pins.dir;
  const objects: BpfObject[] = [];
  let maps: DatapathMaps | undefined;
  let source: KubernetesSource | undefined;
  let loop: SyncLoop | undefined;
  const close = (): void => {
    loop?.stop();
    source?.stop();
    maps?.close();
    for (const o of objects) o.close();
  };
  try {
    // Small maps: many of these run at once.
    for (const program of ['sock', 'tc'] as const)
      objects.push(loadPinned({ objectPath: compileBpf({ program }).path, pinDir, maxEntries: () => 4096 }).object);
    const dp = DatapathMaps.fromObjects(objects);
    maps = dp;
    const syncer = new CheckedSyncer(new Recorder(new MapsAdapter(dp.v4)));
    const log = pino({ level: 'silent' });
    const metrics = new AgentMetrics();
    const status = new SyncStatus(metrics, log);
    const invalid: Problem[] = [];
    const informerErrors: string[] = [];
    const src = new KubernetesSource(kc, nodeName, {
      changed: () => loop?.poke(),
      informerError: (kind, err) => informerErrors.push(`${kind}: ${String((err as Error)?.message ?? err)}`),
      sliceTrigger: (svc, at) => loop?.trigger(svc, at),
    });
    source = src;
    src.model.setNode({ name: nodeName, addresses: [] });
    loop = new SyncLoop(
      src,
      syncer,
      status,
      metrics,
      countingProblemReporter(log, metrics, (ps) => invalid.push(...ps.filter((p) => p.source === 'api'))),
      log,
      { minIntervalMs: 0, syncPeriodMs: 3_600_000, backoff: { initialMs: 100, maxMs: 1000 } },
    );
    loop.start();
    src.start();
    return {
      syncer,
      source: src,
      metrics,
      status,
      invalid,
      informerErrors,
      frontends() {
        const view = buildDumpView(dp.v4.services.entries(), dp.v4.backends.entries(), dp.v4.revNat.entries());
        return new Map(view.map((f) => [f.frontend, f.backends.map((b) => `${b.address} ${b.state}`).sort()]));
      },
      stop() {
        close();
        pins.release();
      },
    };
  } catch (err) {
    // Nothing is left loaded or pinned when the harness fails to start.
    try {
      close();
    } catch {
      /* the error that stopped the start is the one to report */
    }
    try {
      pins.release();
    } catch {
      /* still registered: removed on exit, or by the next sweep */
    }
    throw err;
  }
}

/** Polls until check() returns undefined (done) or the limit passes; rejects with the last complaint. */
export async function eventually(check: () => string | undefined, limitMs = 10_000): Promise<void> {
  const until = Date.now() + limitMs;
  let last: string | undefined = 'not checked';
  while (Date.now() < until) {
    last = check();
    if (last === undefined) return;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`not reached within ${limitMs} ms: ${last}`);
}

export const tmpKubeDir = () => mkdtempSync(join(tmpdir(), 'svcmap-kube-'));
