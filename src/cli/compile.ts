// svcmap compile: builds the BPF objects into the cache, as `make bpf` and
// the image build do; the agent finds them there.
import { z } from 'zod';
import { BPF_PROGRAMS, compileBpf } from '../bpf/compile.ts';
import { parseFlags } from './args.ts';

const schema = z.object({ out: z.string().optional(), force: z.boolean().default(false) });

export const compileHelp = `svcmap compile [--out DIR] [--force]
  Compiles bpf/*.c (${BPF_PROGRAMS.join(', ')}) with clang into the object cache
  (default build/bpf), keyed by a hash of the sources and flags.`;

export function compile(argv: string[], out: (s: string) => void): void {
  const f = parseFlags(argv, { out: { type: 'string' }, force: { type: 'boolean' } }, schema, 'compile');
  for (const program of BPF_PROGRAMS) {
    const r = compileBpf({ program, ...(f.out ? { outDir: f.out } : {}), force: f.force });
    out(`${r.cached ? 'up to date' : 'compiled'}: ${r.path}\n`);
  }
}
