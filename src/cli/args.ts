// Command-line flags: parsed with node:util's parseArgs, then validated with
// zod, so a bad flag value is reported with the flag's name.
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { z } from 'zod';

export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}

type Options = NonNullable<ParseArgsConfig['options']>;

/** Parses argv against `options`, then validates the values with `schema`. */
export function parseFlags<S extends z.ZodType>(argv: string[], options: Options, schema: S, command: string): z.infer<S> {
  const { values, positionals } = split(argv, options, command);
  if (positionals.length) throw new UsageError(`svcmap ${command}: unexpected argument ${JSON.stringify(positionals[0])}`);
  return validate(values, schema, command);
}

/**
 * parseFlags for a command that takes exactly one argument besides its
 * flags (svcmap explain VIP:PORT/PROTO): `arg` validates it, and its first
 * issue is reported with the argument's name.
 */
export function parseFlagsAndArg<S extends z.ZodType, A extends z.ZodType>(
  argv: string[], options: Options, schema: S, command: string, arg: { name: string; schema: A },
): { flags: z.infer<S>; arg: z.infer<A> } {
  const { values, positionals } = split(argv, options, command);
  if (positionals.length === 0) throw new UsageError(`svcmap ${command}: missing ${arg.name}`);
  if (positionals.length > 1) throw new UsageError(`svcmap ${command}: unexpected argument ${JSON.stringify(positionals[1])}`);
  const flags = validate(values, schema, command);
  const parsed = arg.schema.safeParse(positionals[0]);
  if (!parsed.success) throw new UsageError(`svcmap ${command}: ${arg.name}: ${parsed.error.issues[0]!.message}`);
  return { flags, arg: parsed.data };
}

function split(argv: string[], options: Options, command: string): { values: Record<string, unknown>; positionals: string[] } {
  try {
    return parseArgs({ args: argv, options, allowPositionals: true, strict: true }) as { values: Record<string, unknown>; positionals: string[] };
  } catch (err) {
    throw new UsageError(`svcmap ${command}: ${(err as Error).message}`);
  }
}

function validate<S extends z.ZodType>(values: Record<string, unknown>, schema: S, command: string): z.infer<S> {
  const parsed = schema.safeParse(values);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const flag = issue.path.length ? `--${String(issue.path[0]).replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}` : '';
    throw new UsageError(`svcmap ${command}: ${flag ? `${flag}: ` : ''}${issue.message}`);
  }
  return parsed.data;
}

/** "10s", "500ms", "1h", "0" -> milliseconds. */
export const duration = z.string().transform((s, ctx) => {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h)?$/.exec(s.trim());
  if (!m) {
    ctx.addIssue({ code: 'custom', message: `invalid duration ${JSON.stringify(s)} (use e.g. 500ms, 10s, 1h)` });
    return z.NEVER;
  }
  const n = Number(m[1]);
  const unit = m[2] ?? 's';
  return n * { ms: 1, s: 1000, m: 60_000, h: 3_600_000 }[unit as 'ms' | 's' | 'm' | 'h'];
});

export const intString = (min: number, max: number) => z.string().regex(/^\d+$/, 'must be a whole number').transform(Number)
  .refine((n) => n >= min && n <= max, { message: `must be between ${min} and ${max}` });

export const DEFAULT_PIN_DIR = '/sys/fs/bpf/svcmap';

export const pinDirFlag = z.string().startsWith('/', 'must be an absolute path').default(DEFAULT_PIN_DIR);
