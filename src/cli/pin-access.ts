// Reading the pins as someone who may not be allowed to. The agent pins its
// maps root-owned, mode 0600, and the bpf syscall refuses to open them for
// anyone else (BPF_OBJ_GET checks the file mode); a directory that cannot
// be searched looks empty to existsSync. Both used to read as "nothing is
// pinned", sending a non-root user after an agent that runs fine. These
// checks name the real cause.
import { statSync } from 'node:fs';
import { join } from 'node:path';
import { BpfError } from '../bpf/errors.ts';
import { SVCMAP_MAP_SERVICES } from '../maps/constants.ts';

export class PermissionError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'PermissionError';
  }
}

export const needsPrivilege = (pinDir: string) => `needs root (or CAP_BPF and read access to ${pinDir})`;

const DENIED = new Set(['EACCES', 'EPERM']);

function errnoCode(err: unknown): string | undefined {
  if (err instanceof BpfError) return err.code;
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  return typeof code === 'string' ? code : undefined;
}

/**
 * Whether pinDir exists, telling "missing" from "not allowed to look": stat
 * of the directory fails with EACCES when a parent (e.g. /sys/fs/bpf mounted
 * 0700) cannot be searched, and stat of a pin inside it when the directory
 * itself cannot. Throws PermissionError for either.
 */
export function pinDirExists(pinDir: string): boolean {
  for (const path of [pinDir, join(pinDir, SVCMAP_MAP_SERVICES)]) {
    try {
      statSync(path);
    } catch (err) {
      const code = errnoCode(err);
      if (code === 'ENOENT' || code === 'ENOTDIR') return path !== pinDir;
      if (code !== undefined && DENIED.has(code)) throw new PermissionError(`cannot read ${path}: ${code}: ${needsPrivilege(pinDir)}`);
      throw err;
    }
  }
  return true;
}

/**
 * Runs fn (which opens pins under pinDir and reads them), turning EACCES and
 * EPERM, from the bpf syscall or the file system, into PermissionError.
 */
export function withPinAccess<T>(pinDir: string, fn: () => T): T {
  try {
    return fn();
  } catch (err) {
    const code = errnoCode(err);
    if (code === undefined || !DENIED.has(code)) throw err;
    const what = err instanceof BpfError ? err.op : `cannot read ${(err as NodeJS.ErrnoException).path ?? pinDir}`;
    throw new PermissionError(`${what}: ${code}: ${needsPrivilege(pinDir)}`);
  }
}
