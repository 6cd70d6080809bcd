// Per-command help, run through the compiled CLI as a person types it:
// `svcmap COMMAND --help`, `-h` and `svcmap help COMMAND` print that
// command's usage and exit 0 for every command; the usage names every flag
// the parser takes, with its value, choices and default, because both are
// read from one declaration; a flag the command does not take is a usage
// error of one line that points at --help.
import t from 'tap';
import { assertBuilt } from '../../lab/agent-process.ts';
import { type FlagSpec, allFlags, isSwitch } from '../../src/cli/args.ts';
import { COMMANDS } from '../../src/cli/commands.ts';
import { choicesOf } from '../../src/cli/usage.ts';
import { type RunResult, runSvcmapAsync } from './run.ts';

assertBuilt();

const names = COMMANDS.map((c) => c.spec.name);

// Every run this file makes, started at once (each is a Node start-up;
// one after the other they take minutes on a busy machine), read by key.
const key = (args: string[]) => JSON.stringify(args);
const planned: string[][] = [
  ['help'],
  ['--help'],
  [],
  ['help', 'frobnicate'],
  ['help', 'dump', 'extra'],
  ['explain', '--no-such-flag', '--help'],
];
for (const { spec } of COMMANDS) {
  planned.push([spec.name, '--help'], ['help', spec.name], [spec.name, '--no-such-flag']);
  if (spec.name === 'dump') planned.push([spec.name, '-h']);
}
const results = new Map(await Promise.all(planned.map(async (a) => [key(a), await runSvcmapAsync(a)] as const)));
const run = (args: string[]): RunResult => {
  const r = results.get(key(args));
  if (!r) throw new Error(`svcmap ${args.join(' ')} is not in the plan of runs`);
  return r;
};

t.test('svcmap help, --help and no command list every command', async (t) => {
  for (const args of [['help'], ['--help'], []]) {
    const r = run(args);
    t.equal(r.status, 0, `svcmap ${args.join(' ')}: exit 0`);
    t.equal(r.stderr, '', 'nothing on stderr');
    for (const name of names) t.match(r.stdout, new RegExp(`^  ${name} +\\S`, 'm'), `svcmap ${args.join(' ')}: lists ${name}`);
    t.match(r.stdout, /svcmap COMMAND --help/, "says how to get a command's help");
  }
});

/** What the usage text must show of a flag: its column, and the choices and default the declaration gives. */
function expected(name: string, f: FlagSpec): { column: RegExp; notes: string[] } {
  const column = new RegExp(`^  ${f.short ? `-${f.short}, ` : ' {4}'}--${name}${isSwitch(f) ? '' : ` ${f.value}`} `, 'm');
  const notes: string[] = [];
  const choices = choicesOf(f);
  if (choices) notes.push(...choices);
  if (!isSwitch(f) && f.default !== undefined) notes.push(`default ${f.default}`);
  return { column, notes };
}

for (const { spec } of COMMANDS) {
  t.test(`svcmap ${spec.name}: --help, -h and svcmap help ${spec.name} print its usage, exit 0`, async (t) => {
    // -h for one command is enough: it is the same declared flag for all.
    const forms = [[spec.name, '--help'], ['help', spec.name], ...(spec.name === 'dump' ? [[spec.name, '-h']] : [])];
    const outs = forms.map((args) => {
      const r = run(args);
      t.equal(r.status, 0, `svcmap ${args.join(' ')}: exit 0`);
      t.equal(r.stderr, '', `svcmap ${args.join(' ')}: nothing on stderr`);
      return r.stdout;
    });
    t.equal(new Set(outs).size, 1, `the ${forms.length} forms print the same text`);
    const text = outs[0]!;
    t.match(text, new RegExp(`^usage: svcmap ${spec.name}${spec.operand ? ' \\S+' : ''} \\[flags\\]\n`), 'starts with the synopsis');
    // The text as one line per flag entry: wrapped continuation lines joined.
    const flat = text.replace(/\n {10,}/g, ' ');
    for (const [name, f] of Object.entries(allFlags(spec))) {
      const { column, notes } = expected(name, f);
      t.match(text, column, `--${name}${isSwitch(f) ? '' : ` ${f.value}`} is listed`);
      const line = flat.split('\n').find((l) => column.test(`${l}\n`)) ?? '';
      for (const n of notes) t.ok(line.includes(n), `--${name}: says ${JSON.stringify(n)}`);
    }
    t.ok(
      text.split('\n').every((l) => l.length <= 80),
      'no line wider than 80 columns',
    );
    if (spec.name === 'explain') {
      // Help wins over everything else on the line, even a flag the command lacks.
      const r = run([spec.name, '--no-such-flag', '--help']);
      t.same([r.status, r.stdout], [0, text], 'help with a bad flag beside it: still the usage');
    }
  });

  t.test(`svcmap ${spec.name}: a flag it does not take is a usage error pointing at --help`, async (t) => {
    const r = run([spec.name, '--no-such-flag']);
    t.equal(r.status, 2, 'exit 2');
    t.equal(r.stdout, '', 'nothing on stdout');
    t.equal(r.stderr, `svcmap ${spec.name}: unknown flag --no-such-flag (see svcmap ${spec.name} --help)\n`);
  });
}

t.test('each declared default is a value its own flag accepts', async (t) => {
  for (const { spec } of COMMANDS) {
    for (const [name, f] of Object.entries(allFlags(spec))) {
      if (isSwitch(f) || f.default === undefined) continue;
      t.ok(f.schema.safeParse(f.default).success, `svcmap ${spec.name} --${name} ${f.default}`);
    }
  }
});

t.test('help for no such command: a usage error', async (t) => {
  const r = run(['help', 'frobnicate']);
  t.same([r.status, r.stderr], [2, 'svcmap: unknown command "frobnicate"; run svcmap help\n']);
  t.equal(run(['help', 'dump', 'extra']).status, 2, 'one command at a time');
});
