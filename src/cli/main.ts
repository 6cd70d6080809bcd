#!/usr/bin/env node
// svcmap: the command line. Each subcommand lives in its own module, with
// the declaration of its flags (args.ts) that its parser and its usage text
// read.
import { UsageError, helpRequested } from './args.ts';
import { COMMANDS, findCommand } from './commands.ts';
import { debugRequested, reportError } from './errors.ts';
import { commandList, commandUsage } from './usage.ts';

const write = (s: string) => process.stdout.write(s);

const unknown = (name: string) => new UsageError(`unknown command ${JSON.stringify(name)}; run svcmap help`);

async function main(argv: string[]): Promise<void> {
  const [cmd, ...args] = argv;
  if (cmd === undefined || cmd === '--help' || cmd === '-h') return void write(commandList(COMMANDS.map((c) => c.spec)));
  if (cmd === 'help') {
    if (args.length === 0) return void write(commandList(COMMANDS.map((c) => c.spec)));
    const c = findCommand(args[0]!);
    if (!c || args.length > 1)
      throw args.length > 1 ? new UsageError(`svcmap help: unexpected argument ${JSON.stringify(args[1])}`) : unknown(args[0]!);
    return void write(commandUsage(c.spec));
  }
  const c = findCommand(cmd === '--version' ? 'version' : cmd);
  if (!c) throw unknown(cmd);
  if (helpRequested(args)) return void write(commandUsage(c.spec));
  await c.run(args, write);
}

main(process.argv.slice(2)).then(
  () => {
    process.exitCode = 0;
  },
  (err: unknown) => {
    const r = reportError(err, debugRequested(process.argv.slice(2), process.env));
    process.stderr.write(r.text);
    process.exitCode = r.exitCode;
  },
);
