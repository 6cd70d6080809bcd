// Preallocated or not: the maps a full sync fills (services, backends,
// reverse NAT), each created as this build defines it (BPF_F_NO_PREALLOC)
// and once more without that flag (preallocated), with the capacity the
// bench's agent gets at N Services x E endpoints (bench/cp-agent.ts
// agentArgs), filled as a full sync fills them (N x (1 + E) services
// entries, N x E backends, N reverse NAT; batches of what fits 256 KiB, as
// src/maps/typed-map.ts writes). Reports the kernel's time for the inserts
// (system CPU of this process) and the kernel's account of each map's memory
// (fdinfo memlock) empty and full. The two kinds alternate, --reps times.
//
//   node bench/map-prealloc.ts [--n 10000] [--e 10] [--reps 3]     (root; one JSON line per kind and rep)
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { BpfMap } from '../src/bpf/map.ts';
import { SVCMAP_MAP_BACKENDS, SVCMAP_MAP_REVNAT, SVCMAP_MAP_SERVICES } from '../src/maps/constants.ts';
import { LAYOUTS } from '../src/maps/generated/layouts.gen.ts';
import { ALL_MAPS } from '../src/maps/registry.ts';
import { agentArgs } from './cp-agent.ts';

const { values } = parseArgs({
  options: { n: { type: 'string', default: '10000' }, e: { type: 'string', default: '10' }, reps: { type: 'string', default: '3' } },
});
const N = Number(values.n);
const E = Number(values.e);
const BPF_F_NO_PREALLOC = 1;

const flag = (args: string[], name: string) => Number(args[args.indexOf(name) + 1]);
const args = agentArgs('', '', N, E);
const capacity = { services: flag(args, '--max-services'), backends: flag(args, '--max-backends') };
const MAPS = [
  { name: SVCMAP_MAP_SERVICES, entries: N * (1 + E), capacity: capacity.services },
  { name: SVCMAP_MAP_BACKENDS, entries: N * E, capacity: capacity.backends },
  { name: SVCMAP_MAP_REVNAT, entries: N, capacity: capacity.services },
];

function memlock(m: BpfMap): number {
  const hit = /^memlock:\s*(\d+)/m.exec(readFileSync(`/proc/self/fdinfo/${m.fd}`, 'utf8'));
  if (!hit) throw new Error(`no memlock in fdinfo of ${m.label}`);
  return Number(hit[1]);
}

function fill(prealloc: boolean): { insertSysMs: number; insertWallMs: number; emptyMiB: number; fullMiB: number } {
  let sys = 0;
  let wall = 0;
  let empty = 0;
  let full = 0;
  for (const { name, entries, capacity } of MAPS) {
    const spec = ALL_MAPS.find((m) => m.name === name)!;
    const l = LAYOUTS[name]![spec.layoutVersion!]!;
    if (!(l.flags & BPF_F_NO_PREALLOC)) throw new Error(`${name} is preallocated in this build`);
    const m = BpfMap.create(l.type, name.slice(0, 15), l.keySize, l.valueSize, capacity, prealloc ? l.flags & ~BPF_F_NO_PREALLOC : l.flags);
    try {
      empty += memlock(m);
      const chunk = Math.floor((256 * 1024) / (l.keySize + l.valueSize));
      const keys = Buffer.alloc(chunk * l.keySize);
      const vals = Buffer.alloc(chunk * l.valueSize);
      const c0 = process.cpuUsage();
      const t0 = performance.now();
      for (let at = 0; at < entries; at += chunk) {
        const n = Math.min(chunk, entries - at);
        keys.fill(0);
        for (let i = 0; i < n; i++) keys.writeUInt32LE(at + i + 1, i * l.keySize); // distinct, never 0
        m.updateBatch(keys.subarray(0, n * l.keySize), vals.subarray(0, n * l.valueSize), n);
      }
      wall += performance.now() - t0;
      sys += process.cpuUsage(c0).system / 1000;
      full += memlock(m);
    } finally {
      m.close();
    }
  }
  return { insertSysMs: sys, insertWallMs: wall, emptyMiB: empty / 2 ** 20, fullMiB: full / 2 ** 20 };
}

for (let rep = 0; rep < Number(values.reps); rep++) {
  for (const prealloc of [false, true]) {
    const r = fill(prealloc);
    const round = (x: number) => Math.round(x * 10) / 10;
    console.log(
      JSON.stringify({
        rep,
        kind: prealloc ? 'preallocated' : 'BPF_F_NO_PREALLOC (this build)',
        n: N,
        e: E,
        capacity,
        insertSysMs: round(r.insertSysMs),
        insertWallMs: round(r.insertWallMs),
        emptyMiB: round(r.emptyMiB),
        fullMiB: round(r.fullMiB),
      }),
    );
  }
}
