// svcmap compile: builds the BPF objects into the cache, as `make bpf` and
// the image build do; the agent finds them there.
import { z } from 'zod';
import { BPF_PROGRAMS, compileBpf } from '../bpf/compile.ts';
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
  for (const program of BPF_PROGRAMS) {
    const r = compileBpf({ program, ...(f.out ? { outDir: f.out } : {}), force: f.force });
    out(`${r.cached ? 'up to date' : 'compiled'}: ${r.path}\n`);
  }
}
