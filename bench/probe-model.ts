// In-process probe of what the model and the sources cost at N services x 10
// endpoints, without BPF or an API server: validation of the Services (and,
// for comparison, of the Services by zod alone) and slices as the API server
// sends them, the file source's first read of a manifest directory
// (bench/manifests.ts, as bench/cp-files.ts writes it), one changed file, and
// the model's first takeChanges. Each phase `--reps` times, wall and CPU time
// ("[cpu]": user + system, steadier on a loaded machine).
//   node --expose-gc bench/probe-model.ts [--n 10000] [--reps 5] [--only PREFIX,...]
// Before/after: run it from a copy of an older tree (git archive) and from
// this one, alternately; add --cpu-prof for a profile.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { rewriteServiceFile, serviceObject, sliceObject, writeManifestDir } from './manifests.ts';
import { makeServices, withChangedEndpoint } from './workload.ts';
import { validateObject } from '../src/model/validate.ts';
import { IncrementalModel } from '../src/model/incremental.ts';
import { FileSource } from '../src/sources/file/file-source.ts';
import { type KubeObject, ServiceSchema } from '../src/model/schemas.ts';
import * as z from 'zod';

const { values } = parseArgs({
  options: { n: { type: 'string', default: '10000' }, reps: { type: 'string', default: '5' }, only: { type: 'string' } },
});
const n = Number(values.n);
const reps = Number(values.reps);
const services = makeServices(n, 10);
const rawServices = () => services.map((s) => JSON.parse(JSON.stringify(serviceObject(s))) as unknown);
const rawSlices = () => services.map((s) => JSON.parse(JSON.stringify(sliceObject(s, new Date()))) as unknown);
const dir = mkdtempSync(join(tmpdir(), 'svcmap-probe-'));
writeManifestDir(dir, services);
const current = [...services];
const gc = (globalThis as { gc?: () => void }).gc ?? (() => {});

const times = new Map<string, number[]>();
function record(name: string, ms: number) {
  (times.get(name) ?? times.set(name, []).get(name)!).push(ms);
}
/** Wall time, and CPU time (user + system, all threads: less sensitive to a loaded machine) under "cpu". */
async function phase(name: string, f: () => unknown | Promise<unknown>) {
  if (values.only && !values.only.split(',').some((o) => name.startsWith(o))) return;
  gc();
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  await f();
  record(name, performance.now() - t0);
  const c = process.cpuUsage(c0);
  record(`${name} [cpu]`, (c.user + c.system) / 1000);
}

for (let r = 0; r < reps; r++) {
  const svcs = rawServices();
  const slices = rawSlices();
  let validated: KubeObject[] = [];
  await phase('validate services', () => {
    validated = svcs.map((s) => {
      const v = validateObject(s, 'api');
      if (!v.ok) throw new Error('invalid');
      return v.obj;
    });
  });
  await phase('validate services, zod only (before)', () => {
    for (const s of svcs) if (!z.safeParse(ServiceSchema, s, { reportInput: true }).success) throw new Error('invalid');
  });
  let vslices: KubeObject[] = [];
  await phase('validate slices', () => {
    vslices = slices.map((s) => {
      const v = validateObject(s, 'api');
      if (!v.ok) throw new Error('invalid');
      return v.obj;
    });
  });
  if (!validated.length) validated = svcs.map((s) => (validateObject(s, 'api') as { obj: KubeObject }).obj);
  if (!vslices.length) vslices = slices.map((s) => (validateObject(s, 'api') as { obj: KubeObject }).obj);
  await phase('model upsert + takeChanges', () => {
    const m = new IncrementalModel();
    m.setNode({ name: 'node-a', addresses: ['10.0.0.1'] });
    for (const s of validated) m.upsertService(s as never);
    for (const s of vslices) m.upsertSlice(s as never);
    m.takeChanges();
  });
  await phase('file source start (read, parse, validate, model)', async () => {
    const fs = new FileSource({ dir, node: { name: 'node-a', addresses: ['10.0.0.1'] }, debounceMs: 100 });
    await fs.start();
    fs.stop();
  });
  await phase('file source start + takeChanges', async () => {
    const fs = new FileSource({ dir, node: { name: 'node-a', addresses: ['10.0.0.1'] }, debounceMs: 100 });
    await fs.start();
    fs.model.takeChanges();
    fs.stop();
  });
  await phase('one changed file -> read (1000 services, debounce 1 ms)', async () => {
    let read: (() => void) | undefined;
    const fs = new FileSource({ dir, node: { name: 'node-a', addresses: ['10.0.0.1'] }, debounceMs: 1, onRead: () => read?.() });
    await fs.start();
    fs.model.takeChanges();
    const t0 = performance.now();
    const done = new Promise<void>((r) => {
      read = r;
    });
    const next = withChangedEndpoint(current[(r * 7919) % n]!, 1_000_000 + r);
    current[next.index] = next;
    rewriteServiceFile(dir, current, next);
    await done;
    const changes = fs.model.takeChanges();
    record('  one changed file: the read + its takeChanges', performance.now() - t0);
    if (changes.services.size !== 1) throw new Error(`${changes.services.size} services changed, not 1`);
    fs.stop();
  });
}
rmSync(dir, { recursive: true, force: true });
const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
for (const [name, xs] of [...times].sort((a, b) => (a[0] < b[0] ? -1 : 1)))
  console.log(`${name}: median ${med(xs).toFixed(1)} ms  (${xs.map((x) => x.toFixed(0)).join(' ')})`);
