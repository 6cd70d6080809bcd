// Command-line flags, declared once per command as data (CommandSpec): the
// parser (node:util's parseArgs, then each value through its zod schema, so
// a bad value is reported with the flag's name) and the usage text
// (usage.ts) both read the same declaration, and so can a generator of
// reference docs or shell completion.
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { z } from 'zod';
import { LOG_LEVELS } from '../agent/log.ts';

export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}

/** A flag that takes no value: true when given, false when not. */
export interface SwitchSpec {
  value?: undefined;
  short?: string;
  help: string;
}

/** A flag that takes a value. */
export interface ValueSpec {
  /** What the value is called in the usage text: DIR, N, LEVEL... */
  value: string;
  short?: string;
  /** Validates (and converts) the value as typed. */
  schema: z.ZodType;
  /** The value when the flag is not given, as a person would type it: parsed by `schema` like a given one. */
  default?: string;
  /** Where the value comes from when not given, when no fixed default says it (computed at run time). */
  otherwise?: string;
  help: string;
}

export type FlagSpec = SwitchSpec | ValueSpec;
export type FlagSpecs = Record<string, FlagSpec>;

/** The one argument a command takes besides its flags (svcmap explain VIP:PORT/PROTO). */
export interface OperandSpec<S extends z.ZodType = z.ZodType> {
  /** Its name in messages: "missing VIP:PORT/PROTO". */
  name: string;
  /** How the synopsis shows it, when that says more than the name. */
  synopsis?: string;
  schema: S;
}

export interface CommandSpec<F extends FlagSpecs = FlagSpecs, O extends OperandSpec | undefined = OperandSpec | undefined> {
  name: string;
  /** One line, for the list of commands. */
  summary: string;
  /** What the command does, in sentences (wrapped by the usage text). */
  description: string;
  operand?: O;
  flags: F;
}

export const isSwitch = (f: FlagSpec): f is SwitchSpec => f.value === undefined;

/** Flags every command takes. --log-level is the agent's own; the other commands log nothing but take it too, so that `--log-level debug` asks any of them for an error's stack trace. */
export const COMMON_FLAGS = {
  'log-level': {
    value: 'LEVEL',
    schema: z.enum(LOG_LEVELS, { message: `must be one of ${LOG_LEVELS.join(', ')}` }),
    default: 'info',
    help: "what the agent logs; debug also makes any command print an error's stack trace (as SVCMAP_DEBUG=1 does)",
  },
  help: { short: 'h', help: "prints this command's usage" },
} as const satisfies FlagSpecs;

type ValueOf<F> = F extends { schema: infer S extends z.ZodType }
  ? F extends { default: string }
    ? z.output<S>
    : z.output<S> | undefined
  : boolean;
/** What parsing gives for a command's flags: each by its name; undefined for a value not given without default. */
export type FlagValues<F extends FlagSpecs> = { -readonly [K in keyof F]: ValueOf<F[K]> };

/** A command's flags as parsed: its own and the common ones. */
export type Parsed<F extends FlagSpecs> = FlagValues<F & typeof COMMON_FLAGS>;

/** A command's flags and the flags every command takes. */
export function allFlags(spec: CommandSpec): FlagSpecs {
  return { ...spec.flags, ...COMMON_FLAGS };
}

/** Declares a command; `const` keeps each flag's literal shape, so that FlagValues knows which have defaults. */
export function command<const F extends FlagSpecs, O extends OperandSpec | undefined = undefined>(
  spec: CommandSpec<F, O>,
): CommandSpec<F, O> {
  return spec;
}

/** Whether argv asks for the command's usage: --help or -h before any `--`. */
export function helpRequested(argv: readonly string[]): boolean {
  const end = argv.indexOf('--');
  return (end < 0 ? argv : argv.slice(0, end)).some((a) => a === '--help' || a === '-h');
}

/** Parses argv against a command's declaration: its flags (and the common ones), validated; no argument besides them. */
export function parseFlags<F extends FlagSpecs>(spec: CommandSpec<F>, argv: string[]): Parsed<F> {
  const { values, positionals } = split(spec, argv);
  if (positionals.length)
    throw new UsageError(`svcmap ${spec.name}: unexpected argument ${JSON.stringify(positionals[0])}${seeHelp(spec)}`);
  return validate(spec, values) as Parsed<F>;
}

/** parseFlags for a command with an operand: exactly one argument besides the flags, validated, its first issue reported with its name. */
export function parseFlagsAndArg<F extends FlagSpecs, A extends z.ZodType>(
  spec: CommandSpec<F, OperandSpec<A>>,
  argv: string[],
): { flags: Parsed<F>; arg: z.output<A> } {
  const { values, positionals } = split(spec, argv);
  const { operand } = spec;
  if (!operand) throw new Error(`svcmap ${spec.name} declares no operand`);
  if (positionals.length === 0) throw new UsageError(`svcmap ${spec.name}: missing ${operand.name}${seeHelp(spec)}`);
  if (positionals.length > 1)
    throw new UsageError(`svcmap ${spec.name}: unexpected argument ${JSON.stringify(positionals[1])}${seeHelp(spec)}`);
  const flags = validate(spec, values) as Parsed<F>;
  const parsed = operand.schema.safeParse(positionals[0]);
  if (!parsed.success) throw new UsageError(`svcmap ${spec.name}: ${operand.name}: ${parsed.error.issues[0]!.message}`);
  return { flags, arg: parsed.data as z.output<A> };
}

const seeHelp = (spec: CommandSpec) => ` (see svcmap ${spec.name} --help)`;

/** node:util's parseArgs options for a declaration. */
export function parseArgsOptions(flags: FlagSpecs): NonNullable<ParseArgsConfig['options']> {
  return Object.fromEntries(
    Object.entries(flags).map(([name, f]) => [name, { type: isSwitch(f) ? 'boolean' : 'string', ...(f.short ? { short: f.short } : {}) }]),
  );
}

/** The flag as typed in a message: --name, or -x/--name when it has a short form. */
function flagName(flags: FlagSpecs, name: string): string {
  const f = flags[name];
  return f?.short ? `-${f.short}/--${name}` : `--${name}`;
}

function split(spec: CommandSpec, argv: string[]): { values: Record<string, unknown>; positionals: string[] } {
  const flags = allFlags(spec);
  try {
    return parseArgs({ args: argv, options: parseArgsOptions(flags), allowPositionals: true, strict: true }) as {
      values: Record<string, unknown>;
      positionals: string[];
    };
  } catch (err) {
    throw new UsageError(`svcmap ${spec.name}: ${parseArgsMessage(err as Error & { code?: string }, flags)}${seeHelp(spec)}`);
  }
}

/** parseArgs' errors in the words of this CLI: which flag, and what was wrong with it. */
function parseArgsMessage(err: Error & { code?: string }, flags: FlagSpecs): string {
  // parseArgs names the option as typed ('--x', '-x' or '--x <value>').
  const typed = /'(-{1,2}[^' ]+)/.exec(err.message)?.[1];
  const name =
    typed && Object.entries(flags).find(([n, f]) => typed === `--${n}` || (f.short !== undefined && typed === `-${f.short}`))?.[0];
  if (err.code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION') return `unknown flag ${typed ?? err.message}`;
  if (err.code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE' && name !== undefined) {
    const f = flags[name]!;
    return isSwitch(f)
      ? `${flagName(flags, name)} takes no value`
      : `${flagName(flags, name)} needs a value: ${flagName(flags, name)} ${f.value}`;
  }
  return err.message;
}

function validate(spec: CommandSpec, values: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [name, f] of Object.entries(allFlags(spec))) {
    if (isSwitch(f)) {
      out[name] = values[name] === true;
      continue;
    }
    const raw = values[name] ?? f.default;
    if (raw === undefined) continue;
    const parsed = f.schema.safeParse(raw);
    if (!parsed.success) throw new UsageError(`svcmap ${spec.name}: --${name}: ${parsed.error.issues[0]!.message}`);
    out[name] = parsed.data;
  }
  return out;
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

export const intString = (min: number, max: number) =>
  z
    .string()
    .regex(/^\d+$/, 'must be a whole number')
    .transform(Number)
    .refine((n) => n >= min && n <= max, { message: `must be between ${min} and ${max}` });

export const DEFAULT_PIN_DIR = '/sys/fs/bpf/svcmap';

export const pinDirFlag = {
  value: 'DIR',
  schema: z.string().startsWith('/', 'must be an absolute path'),
  default: DEFAULT_PIN_DIR,
  help: "the bpffs directory of svcmap's pins",
} as const satisfies ValueSpec;

/** --no-headers, for every command that prints tables (-o table or wide), as kubectl's. */
export const noHeadersFlag = {
  help: 'prints tables without their header lines, for scripts (-o table and wide; json and yaml have none)',
} as const satisfies SwitchSpec;
