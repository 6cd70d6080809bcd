// Every svcmap command: its declaration (flags, operand, usage; args.ts) and
// what runs it, in the order svcmap help lists them. Read by main.ts, and by
// anything that documents or completes the command line from the
// declarations; importing it runs nothing.
import { agent, agentCommand } from './agent.ts';
import type { CommandSpec } from './args.ts';
import { cleanup, cleanupCommand } from './cleanup.ts';
import { compile, compileCommand } from './compile.ts';
import { completion, completionCommand } from './completion.ts';
import { dump, dumpCommand } from './dump.ts';
import { explain, explainCommand } from './explain.ts';
import { mountHostFs, mountHostFsCommand } from './mount-host-fs.ts';
import { preflight, preflightCommand } from './preflight.ts';
import { status, statusCommand } from './status.ts';
import { version, versionCommand } from './version.ts';

export interface Command {
  spec: CommandSpec;
  run(argv: string[], out: (s: string) => void): void | Promise<void>;
}

export const COMMANDS: readonly Command[] = [
  { spec: agentCommand, run: (argv) => agent(argv) },
  { spec: dumpCommand, run: dump },
  { spec: explainCommand, run: explain },
  { spec: statusCommand, run: status },
  { spec: preflightCommand, run: preflight },
  { spec: cleanupCommand, run: cleanup },
  { spec: mountHostFsCommand, run: mountHostFs },
  { spec: compileCommand, run: compile },
  { spec: versionCommand, run: version },
  {
    spec: completionCommand,
    run: (argv, out) =>
      completion(
        argv,
        out,
        COMMANDS.map((c) => c.spec),
      ),
  },
];

export const findCommand = (name: string): Command | undefined => COMMANDS.find((c) => c.spec.name === name);
