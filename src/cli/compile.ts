// svcmap compile: builds the BPF objects into the cache, as `make bpf` and
// the image build do; the agent finds them there.
import { z } from 'zod';
import { BPF_PROGRAMS, compileBpf } from '../bpf/compile.ts';
import { TEST_LAYOUT_DEFINES } from '../bpf/test-layout.ts';
import { command, parseFlags } from './args.ts';

export const compileCommand = command({
  name: 'compile',
  summary: 'compiles the BPF programs into the object cache',
  description: `Compiles bpf/*.c (${BPF_PROGRAMS.join(', ')}) with clang into the object cache, keyed by a hash of the sources and flags; the agent finds them there.`,
  flags: {
    out: { value: 'DIR', schema: z.string().min(1), otherwise: 'build/bpf', help: 'the object cache' },
    force: { help: 'compiles even if a cached object matches' },
  },
});

export function compile(argv: string[], out: (s: string) => void): void {
  const f = parseFlags(compileCommand, argv);
  // Both object sets: the agent's, and those of the test layout (SVCMAP_TEST_LAYOUT=1, docs/upgrade.md).
  for (const defines of [{}, TEST_LAYOUT_DEFINES]) {
    for (const program of BPF_PROGRAMS) {
      const r = compileBpf({ program, defines, ...(f.out ? { outDir: f.out } : {}), force: f.force });
      out(`${r.cached ? 'up to date' : 'compiled'}: ${r.path}\n`);
    }
  }
}
