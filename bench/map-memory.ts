// The kernel memory of the maps each --max-* option sizes (chart values
// maxServices, maxBackends, conntrackSize, maxAffinity), per entry: each map
// is created as this build defines it (type, flags, key and value sizes from
// src/maps/generated/layouts.gen.ts) with N entries of capacity, empty and
// then full, and the kernel's own account of it is read (fdinfo `memlock`).
// A preallocated map (the LRU maps: conntrack, affinity) costs its capacity
// from the start; the others (BPF_F_NO_PREALLOC) cost what they hold.
//
//   node bench/map-memory.ts [--entries N]     (root; prints a markdown table)
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { BpfMap } from '../src/bpf/map.ts';
import { LAYOUTS } from '../src/maps/generated/layouts.gen.ts';
import { ALL_MAPS, type MapSizeOption } from '../src/maps/registry.ts';

const { values } = parseArgs({ options: { entries: { type: 'string', default: '65536' } } });
const N = Number(values.entries);

const OPTIONS: Record<MapSizeOption, string> = {
  maxServices: 'maxServices (--max-services)',
  maxBackends: 'maxBackends (--max-backends)',
  maxConntrack: 'conntrackSize (--max-conntrack)',
  maxAffinity: 'maxAffinity (--max-affinity)',
};

function memlock(m: BpfMap): number {
  const text = readFileSync(`/proc/self/fdinfo/${m.fd}`, 'utf8');
  const hit = /^memlock:\s*(\d+)/m.exec(text);
  if (!hit) throw new Error(`no memlock in fdinfo of ${m.label}`);
  return Number(hit[1]);
}

interface Row {
  option: MapSizeOption;
  map: string;
  empty: number;
  full: number;
}

function measure(name: string, option: MapSizeOption): Row {
  const spec = ALL_MAPS.find((m) => m.name === name)!;
  const l = LAYOUTS[name]![spec.layoutVersion!]!;
  const m = BpfMap.create(l.type, name.slice(0, 15), l.keySize, l.valueSize, N, l.flags);
  try {
    const empty = memlock(m);
    const chunk = 4096;
    const keys = Buffer.alloc(chunk * l.keySize);
    const vals = Buffer.alloc(chunk * l.valueSize);
    for (let at = 0; at < N; at += chunk) {
      const n = Math.min(chunk, N - at);
      keys.fill(0);
      for (let i = 0; i < n; i++) keys.writeUInt32LE(at + i + 1, i * l.keySize); // distinct, never 0
      m.updateBatch(keys.subarray(0, n * l.keySize), vals.subarray(0, n * l.valueSize), n);
    }
    return { option, map: name, empty, full: memlock(m) };
  } finally {
    m.close();
  }
}

const rows: Row[] = [];
for (const spec of ALL_MAPS) if (spec.size) rows.push(measure(spec.name, spec.size));

const mib = (b: number) => (b / 2 ** 20).toFixed(1);
console.log(
  `Map memory by option, ${N} entries of capacity (fdinfo memlock, kernel ${readFileSync('/proc/sys/kernel/osrelease', 'utf8').trim()})\n`,
);
console.log('| option | map | empty (MiB) | full (MiB) | bytes per entry, full |');
console.log('| --- | --- | --- | --- | --- |');
for (const r of rows) console.log(`| ${OPTIONS[r.option]} | ${r.map} | ${mib(r.empty)} | ${mib(r.full)} | ${Math.round(r.full / N)} |`);
console.log('\n| option | bytes per entry, all its maps full | of which allocated at creation |');
console.log('| --- | --- | --- |');
for (const option of Object.keys(OPTIONS) as MapSizeOption[]) {
  const mine = rows.filter((r) => r.option === option);
  const full = mine.reduce((s, r) => s + r.full, 0);
  const empty = mine.reduce((s, r) => s + r.empty, 0);
  console.log(`| ${OPTIONS[option]} | ${Math.round(full / N)} | ${Math.round(empty / N)} |`);
}
