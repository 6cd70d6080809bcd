// svcmap status's lb mode line: the node's default as the running agent says
// it (--lb-mode, only the agent knows it), and what the pins hold: how many
// frontends from outside carry direct server return (SVC_F_DSR), whether by
// that default or by their Services' svcmap.io/lb-mode.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { BpfMap } from '../bpf/map.ts';
import type { SvcKey, SvcValue } from '../maps/codecs.ts';
import { type LbMode, SVC_F_DSR, SVC_F_EXTERNALIP, SVC_F_LOADBALANCER, SVC_F_NODEPORT, SVC_SCOPE_EXT } from '../maps/constants.ts';
import { services6Map, servicesMap } from '../maps/registry.ts';
import { TypedMap } from '../maps/typed-map.ts';

/** Frontends (their external master entries) that traffic from outside reaches, and how many of them carry SVC_F_DSR. */
export interface DsrCount {
  dsr: number;
  fromOutside: number;
}

const FROM_OUTSIDE = SVC_F_NODEPORT | SVC_F_LOADBALANCER | SVC_F_EXTERNALIP;

export function countDsr(entries: Iterable<readonly [SvcKey, SvcValue]>, into: DsrCount = { dsr: 0, fromOutside: 0 }): DsrCount {
  for (const [k, v] of entries) {
    if (k.slot !== 0 || k.scope !== SVC_SCOPE_EXT || (v.flags & FROM_OUTSIDE) === 0) continue;
    into.fromOutside++;
    if (v.flags & SVC_F_DSR) into.dsr++;
  }
  return into;
}

/** Both families' services maps, as pinned under pinDir. */
export function pinnedDsrCount(pinDir: string): DsrCount {
  const count: DsrCount = { dsr: 0, fromOutside: 0 };
  for (const spec of [servicesMap, services6Map]) {
    const path = join(pinDir, spec.name);
    if (!existsSync(path)) continue;
    const m = new TypedMap(spec, BpfMap.openPinned(path));
    try {
      countDsr(m.entries(), count);
    } finally {
      m.raw.close();
    }
  }
  return count;
}

/** The line: the agent's --lb-mode (undefined: it did not say), then the frontends that use DSR. */
export function lbModeText(agentMode: LbMode | undefined, c: DsrCount): string {
  const mode = agentMode ? `${agentMode} (the agent's --lb-mode)` : 'unknown (the agent did not say)';
  return `lb mode: ${mode}; direct server return on ${c.dsr} of ${c.fromOutside} frontend${c.fromOutside === 1 ? '' : 's'} from outside`;
}
