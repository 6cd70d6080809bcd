#!/usr/bin/env node
// svcmap: the command line. Each subcommand lives in its own module.
import { EnvironmentError } from '../bpf/environment.ts';
import { BpfError } from '../bpf/errors.ts';
import { LayoutDriftError } from '../maps/btf-check.ts';
import { agent, agentHelp } from './agent.ts';
import { UsageError } from './args.ts';
import { cleanup, cleanupHelp } from './cleanup.ts';
import { compile, compileHelp } from './compile.ts';
import { dump, dumpHelp } from './dump.ts';
import { status, statusHelp } from './status.ts';
import { version, versionHelp } from './version.ts';

const HELP = `svcmap: an eBPF replacement for kube-proxy

usage: svcmap COMMAND [flags]

${agentHelp}

${dumpHelp}

${statusHelp}

${cleanupHelp}

${compileHelp}

${versionHelp}
`;

const write = (s: string) => process.stdout.write(s);

async function main(argv: string[]): Promise<number> {
  const [cmd, ...rest] = argv;
  switch (cmd) {
    case 'agent': await agent(rest); return 0;
    case 'dump': dump(rest, write); return 0;
    case 'status': status(rest, write); return 0;
    case 'cleanup': cleanup(rest, write); return 0;
    case 'compile': compile(rest, write); return 0;
    case 'version': case '--version': version(rest, write); return 0;
    case undefined: case 'help': case '--help': case '-h': write(HELP); return 0;
    default: throw new UsageError(`unknown command ${JSON.stringify(cmd)}; run svcmap help`);
  }
}

main(process.argv.slice(2)).then(
  (code) => { process.exitCode = code; },
  (err: unknown) => {
    if (err instanceof UsageError) {
      process.stderr.write(`${err.message}\n`);
      process.exitCode = 2;
      return;
    }
    const known = err instanceof EnvironmentError || err instanceof BpfError || err instanceof LayoutDriftError;
    process.stderr.write(`svcmap: ${known ? (err as Error).message : (err as Error)?.stack ?? String(err)}\n`);
    process.exitCode = 1;
  },
);
