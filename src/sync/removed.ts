// Which backends a plan takes out of which frontends: what socket
// termination needs (src/agent/datapath/socket-terminator.ts) to end the connected
// sockets the socket LB pointed at them. Pure, computed from the state
// before the plan is committed and the plan itself; O(frontends changed).
import type { Plan } from './plan.ts';
import type { FrontendState, MapState } from './state.ts';

/** A backend that left a frontend: the frontend is its reverse NAT id, as the per-socket reverse NAT map records it. */
export interface RemovedBackend {
  addr: string;
  port: number;
  proto: number;
  revNatId: number;
}

/**
 * The (backend, frontend) pairs the plan removes: a backend that was in a
 * slot of a frontend and is in none of its slots afterwards, or all of a
 * frontend's backends when the frontend goes. Each pair names the reverse
 * NAT id the frontend had before the plan: the one its sockets recorded.
 */
export function removedBackends(before: MapState, plan: Plan): RemovedBackend[] {
  const out: RemovedBackend[] = [];
  const seen = new Set<string>();
  const add = (fe: FrontendState, id: number) => {
    const be = before.backends.get(id);
    if (!be) return;
    const revNatId = fe.master.rev_nat_id;
    const k = `${be.addr}:${be.port}/${be.proto}@${revNatId}`;
    if (seen.has(k)) return;
    seen.add(k);
    out.push({ addr: be.addr, port: be.port, proto: be.proto, revNatId });
  };
  for (const [id, next] of plan.delta.frontendSets) {
    const cur = before.frontends.get(id);
    if (!cur) continue;
    const stays = new Set(next.slots);
    for (const s of cur.slots) if (s !== undefined && !stays.has(s)) add(cur, s);
  }
  for (const id of plan.delta.frontendDeletes) {
    const cur = before.frontends.get(id);
    if (!cur) continue;
    for (const s of cur.slots) if (s !== undefined) add(cur, s);
  }
  return out;
}
