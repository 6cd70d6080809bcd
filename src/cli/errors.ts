// What a failed command prints: one line, "svcmap: <message>", and the exit
// code (2: the command line was wrong, 1: anything else). A person acting on
// the message needs no stack trace; a developer asks for it with
// --log-level debug or SVCMAP_DEBUG=1.
import { UsageError } from './args.ts';

/** Whether the stack trace was asked for: --log-level debug anywhere in argv, or SVCMAP_DEBUG=1. */
export function debugRequested(argv: readonly string[], env: NodeJS.ProcessEnv): boolean {
  if (env.SVCMAP_DEBUG === '1' || env.SVCMAP_DEBUG === 'true') return true;
  return argv.some((a, i) => a === '--log-level=debug' || (a === '--log-level' && argv[i + 1] === 'debug'));
}

// Thrown by JavaScript itself: a bug in svcmap rather than something the
// person can fix, so the one line says how to get the trace for a report.
const BUGS = [TypeError, ReferenceError, RangeError, SyntaxError];

export interface ErrorReport {
  /** What goes to stderr, ending in a newline. */
  text: string;
  exitCode: 1 | 2;
}

export function reportError(err: unknown, debug: boolean): ErrorReport {
  const exitCode = err instanceof UsageError ? 2 : 1;
  const message = err instanceof Error ? err.message : String(err);
  // Usage errors already name the command ("svcmap dump: --output: ..."): the
  // same shape, more precise.
  let line = /^svcmap( [a-z-]+)?: /.test(message) ? message : `svcmap: ${message}`;
  if (!debug && BUGS.some((c) => err instanceof c)) line += ' (a bug in svcmap: run with SVCMAP_DEBUG=1 for the stack trace and report it)';
  let text = `${line}\n`;
  if (debug && err instanceof Error && err.stack) {
    // The frames only: the stack's first lines repeat the message.
    const at = err.stack.indexOf('\n    at ');
    if (at >= 0) text += `${err.stack.slice(at + 1)}\n`;
  }
  return { text, exitCode };
}
