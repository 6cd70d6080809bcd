// Errors from the BPF syscall and libbpf, carrying what a person needs to act:
// the operation, the errno name, libbpf's text, and for a failed load the
// verifier log.
import { constants } from 'node:os';

const errnoNames = new Map<number, string>();
for (const [name, value] of Object.entries(constants.errno)) {
  if (!errnoNames.has(value)) errnoNames.set(value, name);
}

/** `EPERM` for 1; `errno 4095` when the number has no name. */
export function errnoName(errno: number): string {
  return errnoNames.get(Math.abs(errno)) ?? `errno ${Math.abs(errno)}`;
}

export function errnoNumber(name: string): number {
  const n = (constants.errno as Record<string, number>)[name];
  if (n === undefined) throw new Error(`unknown errno name ${name}`);
  return n;
}

export class BpfError extends Error {
  readonly op: string;
  readonly errno: number;
  readonly code: string;
  readonly detail: string;
  readonly log: string;

  constructor(op: string, errno: number, detail: string, log = '') {
    const code = errnoName(errno);
    const logPart = log.trim() ? `\n${log.trimEnd()}` : '';
    super(`${op}: ${code}: ${detail}${hintFor(code)}${logPart}`);
    this.name = 'BpfError';
    this.op = op;
    this.errno = Math.abs(errno);
    this.code = code;
    this.detail = detail;
    this.log = log;
  }
}

/** The fix, where one cause is far more likely than the others. */
function hintFor(code: string): string {
  if (code === 'EPERM') return ' (needs root or CAP_BPF and CAP_NET_ADMIN)';
  return '';
}
