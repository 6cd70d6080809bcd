// What a stopping agent leaves serving: the pins under the pin directory (the
// maps, and the links that keep the programs attached) and classic tc filters
// (which have no pin). Read from the pin directory itself as the agent exits,
// so the last log line says what is really there, not what was meant to be.
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { linkPinDir } from '../../bpf/loader.ts';
import type { TcAttachment } from './tc-datapath.ts';

export interface LeftInPlace {
  pinDir: string;
  /** The maps pinned in the pin directory. */
  maps: string[];
  /** The pinned links (cgroup hooks and tcx programs), each attaching one program. */
  links: string[];
  /** Classic tc filters ("device/direction"), attached without a link to pin. */
  tcFilters: string[];
}

export function leftInPlace(pinDir: string, tc: readonly TcAttachment[]): LeftInPlace {
  const files = (dir: string) =>
    existsSync(dir)
      ? readdirSync(dir)
          .filter((n) => !statSync(join(dir, n)).isDirectory())
          .sort()
      : [];
  return {
    pinDir,
    maps: files(pinDir),
    links: files(linkPinDir(pinDir)),
    tcFilters: tc.filter((a) => a.mode === 'tc').map((a) => `${a.device}/${a.direction}`),
  };
}
