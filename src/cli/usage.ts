// The usage text of a command (svcmap COMMAND --help, svcmap help COMMAND)
// and the list of commands (svcmap help), written from the declarations the
// parser reads (args.ts): a flag's value name, choices and default are said
// once, there. Pure.
import { z } from 'zod';
import { type CommandSpec, type FlagSpec, allFlags, isSwitch } from './args.ts';

const WIDTH = 80;

/** Words of `text` in lines of at most `width` characters (a longer word gets a line of its own). */
export function wrap(text: string, width: number): string[] {
  const lines: string[] = [];
  let line = '';
  for (const word of text.split(/\s+/).filter(Boolean)) {
    if (line && line.length + 1 + word.length > width) {
      lines.push(line);
      line = word;
    } else {
      line = line ? `${line} ${word}` : word;
    }
  }
  if (line) lines.push(line);
  return lines;
}

/** The values a flag accepts, when its schema is a list of them. */
export function choicesOf(f: FlagSpec): readonly string[] | undefined {
  if (isSwitch(f) || !(f.schema instanceof z.ZodEnum)) return undefined;
  return f.schema.options.map(String);
}

const list = (xs: readonly string[]) => (xs.length < 2 ? xs.join('') : `${xs.slice(0, -1).join(', ')} or ${xs.at(-1)}`);

/** A flag's help sentence with what the declaration says beside it: its choices and its default. */
export function flagHelp(f: FlagSpec): string {
  const notes: string[] = [];
  const choices = choicesOf(f);
  if (choices) notes.push(list(choices));
  if (!isSwitch(f)) {
    if (f.default !== undefined) notes.push(`default ${f.default}`);
    else if (f.otherwise !== undefined) notes.push(`default: ${f.otherwise}`);
  }
  return notes.length ? `${f.help} (${notes.join('; ')})` : f.help;
}

/** `svcmap NAME OPERAND [flags]`. */
export function synopsis(spec: CommandSpec): string {
  const operand = spec.operand ? ` ${spec.operand.synopsis ?? spec.operand.name}` : '';
  return `svcmap ${spec.name}${operand} [flags]`;
}

/** The flag column: `-o, --output FORMAT` or `    --pin-dir DIR`. */
function flagColumn(name: string, f: FlagSpec): string {
  const short = f.short ? `-${f.short}, ` : '    ';
  return `${short}--${name}${isSwitch(f) ? '' : ` ${f.value}`}`;
}

/** A command's usage: synopsis, description, then each flag with its value, choices and default. */
export function commandUsage(spec: CommandSpec): string {
  const flags = Object.entries(allFlags(spec));
  const col = Math.max(...flags.map(([n, f]) => flagColumn(n, f).length)) + 2;
  const out = [`usage: ${synopsis(spec)}`, '', ...wrap(spec.description, WIDTH), '', 'Flags:'];
  for (const [name, f] of flags) {
    const left = `  ${flagColumn(name, f)}`.padEnd(col + 2);
    const right = wrap(flagHelp(f), Math.max(30, WIDTH - col - 2));
    out.push(`${left}${right[0] ?? ''}`, ...right.slice(1).map((l) => `${' '.repeat(col + 2)}${l}`));
  }
  return `${out.join('\n')}\n`;
}

/** svcmap help: every command with its summary, and where to read more. */
export function commandList(specs: readonly CommandSpec[]): string {
  const col = Math.max(...specs.map((s) => s.name.length)) + 2;
  return [
    'svcmap: an eBPF replacement for kube-proxy',
    '',
    'usage: svcmap COMMAND [flags]',
    '',
    'Commands:',
    ...specs.map((s) => `  ${s.name.padEnd(col)}${s.summary}`),
    '',
    "svcmap COMMAND --help (or svcmap help COMMAND) prints a command's flags.",
    'Exit codes: 0 done, 1 failed, 2 the command line is wrong.',
    '',
  ].join('\n');
}
