// The sync engine's first full sync at N Services x E endpoints, in-process,
// split into what it costs: the plan, the commit to the tracked state, the
// batched writes to real BPF maps (the sock object's maps, pinned in a
// directory of this run's own, nothing attached), and the heap the tracked
// state holds. Given the root of another checkout (e.g. `git archive` of an
// earlier commit), its src/sync and src/maps run interleaved with this one's
// over the same targets and the same maps: on a shared machine only ratios
// taken side by side in one run mean anything.
//   node --expose-gc bench/sync-cpu.ts [--n 10000] [--e 10] [--reps 5] [--other DIR] [--heap] [--prof FILE]
// --prof writes a .cpuprofile of the reps (started after the maps are loaded:
// the profiler's signals make the verifier give up with EAGAIN).
// Prints one JSON line per variant and measure (median and min over the reps, ms of wall and of CPU;
// thread: the main thread's CPU alone, what the sync itself costs, GC and JIT threads left out;
// coldThread: the same of the warm-up run, code not yet optimized, as in the agent's first sync).
// encode: the plan's entries through the codecs without the syscalls (the writes' own user time).
import { mkdirSync, writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { compileBpf } from '../src/bpf/compile.ts';
import { loadPinned } from '../src/bpf/loader.ts';
import { SVCMAP_MAP_BACKENDS, SVCMAP_MAP_REVNAT, SVCMAP_MAP_SERVICES } from '../src/maps/constants.ts';
import { buildDesiredState } from '../test/model/desired.ts';
import type { EndpointSlice, Service } from '../src/model/schemas.ts';
import { validateObject } from '../src/model/validate.ts';
import { toTargets } from '../src/agent/loops/targets.ts';
import type { FrontendTarget } from '../src/sync/targets.ts';
import { slotEntries } from '../src/sync/maps-adapter.ts';
import { newRunId } from '../lab/names.ts';
import { ensureBpffs, labPinDir, removePinDir } from '../lab/pins.ts';
import { serviceObject, sliceObject } from './manifests.ts';
import { makeServices } from './workload.ts';

const { values: args } = parseArgs({
  options: {
    n: { type: 'string', default: '10000' },
    e: { type: 'string', default: '10' },
    reps: { type: 'string', default: '5' },
    other: { type: 'string' },
    prof: { type: 'string' },
    heap: { type: 'boolean', default: false },
    'no-maps': { type: 'boolean', default: false },
  },
});
const n = Number(args.n);
const e = Number(args.e);
const reps = Number(args.reps);
const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) throw new Error('run with node --expose-gc');

function targetsOf(count: number, perService: number): FrontendTarget[] {
  const svcs: Service[] = [];
  const slices: EndpointSlice[] = [];
  for (const s of makeServices(count, perService)) {
    for (const raw of [serviceObject(s), sliceObject(s)]) {
      const r = validateObject(raw, 'bench');
      if (!r.ok) throw new Error(`bench object invalid: ${JSON.stringify(r.problems)}`);
      (r.obj.kind === 'Service' ? svcs : (slices as unknown[])).push(r.obj as never);
    }
  }
  return toTargets(buildDesiredState({ services: svcs, slices }).state);
}

/** The modules of one checkout that the sync runs on (loose types: the other checkout's may differ). */
interface Variant {
  name: string;
  plan: { planSync: Function; commitPlan: Function };
  apply: { applyPlan: Function };
  state: { emptyState: () => object };
  adapter: new (maps: unknown) => object;
  /** The IPv4 maps' specs: their codecs encode the plan's entries (the `encode` measure). */
  specs: Record<
    'services' | 'backends' | 'revNat',
    { key: { encode: Function; layout: { size: number } }; value: { encode: Function; layout: { size: number } } }
  >;
  openPinned: (dir: string) => { family(f: 4): unknown; close(): void };
}

async function variant(name: string, root: string): Promise<Variant> {
  const at = (p: string) => import(resolve(root, p));
  const [plan, apply, state, adapter, dm, registry] = await Promise.all([
    at('src/sync/plan.ts'),
    at('src/sync/apply.ts'),
    at('src/sync/state.ts'),
    at('src/sync/maps-adapter.ts'),
    at('src/maps/datapath-maps.ts'),
    at('src/maps/registry.ts'),
  ]);
  return {
    name,
    plan,
    apply,
    state,
    adapter: adapter.MapsAdapter,
    specs: registry.FAMILY_MAPS[4],
    openPinned: (dir) => dm.DatapathMaps.openPinned(dir),
  };
}

/**
 * The first full sync's entries encoded by the maps' codecs into one reused
 * buffer, as the batched writes encode them, without the syscalls: the
 * user-space share of the writes.
 */
function encodeAll(v: Variant, plan: any): void {
  const { services, backends, revNat } = v.specs;
  const buf = Buffer.alloc(64);
  const each = (spec: Variant['specs']['services'], entries: Iterable<readonly [unknown, unknown]>) => {
    for (const [k, val] of entries) {
      spec.key.encode(k, buf, 0);
      spec.value.encode(val, buf, spec.key.layout.size);
    }
  };
  each(backends, plan.backendUpserts);
  each(revNat, plan.revNatUpserts);
  // The slots as MapsAdapter.putSlots hands them to the batch (this checkout's, for both variants).
  const slot = slotEntries(plan.slotUpserts);
  for (let i = 0; i < plan.slotUpserts.length; i++) {
    const [k, val] = slot(i);
    services.key.encode(k, buf, 0);
    services.value.encode(val, buf, services.key.layout.size);
  }
  each(services, plan.masterUpserts);
}

const CAPACITY = { services: 1 << 22, backends: 1 << 22, revNat: 1 << 22, srcRanges: 0 };

/**
 * Wall, CPU (user + system) and system (the kernel: the map syscalls) ms of
 * fn, the process's and the main thread's alone (thread: without V8's
 * helper threads, the figure least moved by a busy host).
 */
function timed(fn: () => void): { wall: number; cpu: number; sys: number; thread: number; threadSys: number } {
  const c = process.cpuUsage();
  const tc = process.threadCpuUsage();
  const t = performance.now();
  fn();
  const wall = performance.now() - t;
  const td = process.threadCpuUsage(tc);
  const d = process.cpuUsage(c);
  return { wall, cpu: (d.user + d.system) / 1000, sys: d.system / 1000, thread: (td.user + td.system) / 1000, threadSys: td.system / 1000 };
}

type Sample = Record<string, ReturnType<typeof timed>>;

/** One first full sync from empty, step by step, then the unchanged plan, then removing it all (the maps end empty). */
function runOnce(v: Variant, targets: readonly FrontendTarget[], writer: object | undefined): Sample {
  const out: Sample = {};
  const st = v.state.emptyState();
  let plan: unknown;
  gc!();
  out.plan = timed(() => {
    plan = v.plan.planSync(st, targets, CAPACITY);
  });
  out.encode = timed(() => encodeAll(v, plan));
  if (writer) out.writes = timed(() => v.apply.applyPlan(plan, writer));
  out.commit = timed(() => v.plan.commitPlan(st, plan));
  // What a restarted agent reads back from the pinned maps before its first sync (readState: every entry, decoded).
  if (writer) out.readState = timed(() => (writer as { readState(): unknown }).readState());
  out.unchanged = timed(() => {
    plan = v.plan.planSync(st, targets, CAPACITY);
  });
  // 200 partial syncs of one Service each (one endpoint's port changed), plan + commit: what one change costs the engine.
  out.partial200 = timed(() => {
    for (let k = 0; k < 200; k++) {
      const t = targets[(k * 7919) % targets.length]!;
      const changed = { ...t, backends: t.backends.map((b, i) => (i === 0 ? { ...b, port: b.port + 1 } : b)) };
      const p = v.plan.planSync(st, [changed], CAPACITY, { full: false, removable: [t.id] });
      if (writer) v.apply.applyPlan(p, writer);
      v.plan.commitPlan(st, p);
    }
  });
  plan = v.plan.planSync(st, [], CAPACITY);
  if (writer) out.removeAll = timed(() => v.apply.applyPlan(plan, writer));
  v.plan.commitPlan(st, plan);
  return out;
}

/** The tracked state after a full sync (in a frame of its own: the plan must not stay live in one of the caller's registers). */
function syncedState(v: Variant, targets: readonly FrontendTarget[]): object {
  const st = v.state.emptyState();
  v.plan.commitPlan(st, v.plan.planSync(st, targets, CAPACITY));
  return st;
}

/** Live heap the tracked state of a full sync adds, after collections (the targets, which it shares strings and keys with, already live). */
function stateHeapMiB(v: Variant, targets: readonly FrontendTarget[]): number {
  const used = () => {
    gc!();
    gc!();
    return process.memoryUsage().heapUsed;
  };
  const before = used();
  const holder: { st?: object } = { st: syncedState(v, targets) };
  const after = used();
  holder.st = undefined;
  return (after - before) / 2 ** 20;
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[s.length >> 1]!;
};

const variants = [await variant('this', resolve(import.meta.dirname, '..'))];
if (args.other) variants.push(await variant('other', args.other));
const targets = targetsOf(n, e);

if (args.heap) {
  for (let r = 0; r < reps; r++) {
    for (const v of variants)
      process.stdout.write(`${JSON.stringify({ variant: v.name, n, e, stateHeapMiB: +stateHeapMiB(v, targets).toFixed(2) })}\n`);
  }
} else {
  let pinDir: string | undefined;
  let close: () => void = () => {};
  const writers = new Map<Variant, object | undefined>();
  try {
    if (!args['no-maps']) {
      ensureBpffs();
      pinDir = labPinDir(newRunId(), 'sync', 'bench');
      mkdirSync(pinDir, { recursive: true });
      const entries = Math.ceil(n * (e + 1) * 1.05) + 1024;
      const sizes = new Map([
        [SVCMAP_MAP_SERVICES, entries],
        [SVCMAP_MAP_BACKENDS, entries],
        [SVCMAP_MAP_REVNAT, n + 1024],
      ]);
      const loaded = loadPinned({ objectPath: compileBpf({ program: 'sock' }).path, pinDir, maxEntries: (name) => sizes.get(name) });
      const opened = variants.map((v) => v.openPinned(pinDir!));
      variants.forEach((v, i) => writers.set(v, new v.adapter(opened[i]!.family(4))));
      close = () => {
        for (const m of opened) m.close();
        loaded.object.close();
      };
    }
    const samples = new Map<Variant, Sample[]>(variants.map((v) => [v, []]));
    // Warm-up (JIT), then the reps, the variants taking turns.
    const cold = new Map(variants.map((v) => [v, runOnce(v, targets, writers.get(v))]));
    const session = args.prof ? new Session() : undefined;
    if (session) {
      session.connect();
      await session.post('Profiler.enable');
      await session.post('Profiler.setSamplingInterval', { interval: 200 });
      await session.post('Profiler.start');
    }
    for (let r = 0; r < reps; r++) for (const v of variants) samples.get(v)!.push(runOnce(v, targets, writers.get(v)));
    if (session) writeFileSync(args.prof!, JSON.stringify((await session.post('Profiler.stop')).profile));
    for (const [v, list] of samples) {
      // cold: the warm-up run, the code not yet optimized, as in the agent's first full sync (main thread's ms).
      const first = Object.fromEntries(Object.entries(cold.get(v)!).map(([k, x]) => [k, +x.thread.toFixed(1)]));
      const summary: Record<string, unknown> = { variant: v.name, n, e, reps, coldThread: first };
      for (const k of Object.keys(list[0]!)) {
        const wall = list.map((s) => s[k]!.wall);
        const cpu = list.map((s) => s[k]!.cpu);
        const sys = list.map((s) => s[k]!.sys);
        const thread = list.map((s) => s[k]!.thread);
        const threadSys = list.map((s) => s[k]!.threadSys);
        summary[k] = {
          wallMedian: +median(wall).toFixed(1),
          wallMin: +Math.min(...wall).toFixed(1),
          cpuMedian: +median(cpu).toFixed(1),
          sysMedian: +median(sys).toFixed(1),
          threadMedian: +median(thread).toFixed(1),
          threadSysMedian: +median(threadSys).toFixed(1),
        };
      }
      process.stdout.write(`${JSON.stringify(summary)}\n`);
    }
  } finally {
    close();
    if (pinDir) removePinDir(pinDir);
  }
}
