// What loading each datapath object costs the agent at start: the main
// thread's CPU for loadPinned() (the kernel's verifier, nearly all of it),
// each object into a pin directory of this run's own, nothing attached.
// Given other checkouts (their roots), each loads its own build of the
// objects, the checkouts taking turns: on a shared machine only figures
// taken side by side mean anything.
//   node bench/bpf-load.ts [--reps 3] [--program sock --program tc] [ROOT...]
// Prints one JSON line per checkout and rep: ms of CPU per object.
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';

const { values: args, positionals } = parseArgs({
  options: {
    reps: { type: 'string', default: '3' },
    program: { type: 'string', multiple: true, default: ['sock', 'tc'] },
  },
  allowPositionals: true,
});
if (process.getuid?.() !== 0) throw new Error('needs root (BPF)');
const roots = positionals.length ? positionals.map((r) => resolve(r)) : [resolve(import.meta.dirname, '..')];

/** One checkout's loader, compiler and pin helpers (each checkout compiles its own bpf/). */
async function checkout(root: string) {
  const at = (p: string) => import(resolve(root, p));
  const [compile, loader, pins, names] = await Promise.all([
    at('src/bpf/compile.ts'),
    at('src/bpf/loader.ts'),
    at('lab/pins.ts'),
    at('lab/names.ts'),
  ]);
  return { root, compile, loader, pins, names };
}

const checkouts = [];
for (const r of roots) checkouts.push(await checkout(r));
checkouts[0]!.pins.ensureBpffs();
for (let rep = 0; rep < Number(args.reps); rep++) {
  for (const c of checkouts) {
    const ms: Record<string, number> = {};
    for (const program of args.program) {
      const pinDir = c.pins.labPinDir(c.names.newRunId(), 'load', 'bench');
      try {
        const path = c.compile.compileBpf({ program }).path;
        const before = process.threadCpuUsage();
        const loaded = c.loader.loadPinned({ objectPath: path, pinDir });
        const d = process.threadCpuUsage(before);
        ms[program] = Math.round((d.user + d.system) / 1000);
        loaded.object.close();
      } finally {
        c.pins.removePinDir(pinDir);
      }
    }
    process.stdout.write(`${JSON.stringify({ root: c.root, rep, loadCpuMs: ms })}\n`);
  }
}
