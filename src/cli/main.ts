#!/usr/bin/env node
// svcmap: the command line. Each subcommand lives in its own module.
import { z } from 'zod';
import { LOG_LEVELS } from '../agent/log.ts';
import { agent, agentHelp } from './agent.ts';
import { UsageError } from './args.ts';
import { cleanup, cleanupHelp } from './cleanup.ts';
import { compile, compileHelp } from './compile.ts';
import { dump, dumpHelp } from './dump.ts';
import { debugRequested, reportError } from './errors.ts';
import { explain, explainHelp } from './explain.ts';
import { status, statusHelp } from './status.ts';
import { version, versionHelp } from './version.ts';

const HELP = `svcmap: an eBPF replacement for kube-proxy

usage: svcmap COMMAND [flags]

${agentHelp}

${dumpHelp}

${explainHelp}

${statusHelp}

${cleanupHelp}

${compileHelp}

${versionHelp}

Every command:
  --log-level LEVEL      debug also prints an error's stack trace (as does the
                         environment variable SVCMAP_DEBUG=1)
Exit codes: 0 done, 1 failed, 2 the command line is wrong.
`;

const write = (s: string) => process.stdout.write(s);

const logLevel = z.enum(LOG_LEVELS, { message: `must be one of ${LOG_LEVELS.join(', ')}` });

/**
 * --log-level is the agent's own flag; the other commands log nothing, but
 * take it too so that `--log-level debug` asks any of them for the stack
 * trace of an error. Removed here, validated like every flag.
 */
function withoutLogLevel(cmd: string, argv: string[]): string[] {
  const rest: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a !== '--log-level' && !a.startsWith('--log-level=')) {
      rest.push(a);
      continue;
    }
    const value = a === '--log-level' ? argv[++i] : a.slice('--log-level='.length);
    if (value === undefined) throw new UsageError(`svcmap ${cmd}: Option '--log-level <value>' argument missing`);
    const parsed = logLevel.safeParse(value);
    if (!parsed.success) throw new UsageError(`svcmap ${cmd}: --log-level: ${parsed.error.issues[0]!.message}`);
  }
  return rest;
}

async function main(argv: string[]): Promise<number> {
  const [cmd, ...args] = argv;
  if (cmd === 'agent') {
    await agent(args);
    return 0;
  }
  const rest = cmd === undefined ? [] : withoutLogLevel(cmd, args);
  switch (cmd) {
    case 'dump': dump(rest, write); return 0;
    case 'explain': explain(rest, write); return 0;
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
    const r = reportError(err, debugRequested(process.argv.slice(2), process.env));
    process.stderr.write(r.text);
    process.exitCode = r.exitCode;
  },
);
