// Live connections per backend (svcmap_conns, svcmap_conns6): what the
// datapath counts for lc, sed and nq, read for the metrics. Only backends
// with a connection are listed: a node with 100k backends and a handful of
// busy ones exports a handful of series.
import { protoName } from './constants.ts';
import type { FamilyMaps } from './datapath-maps.ts';

export interface BackendConnectionsRow {
  family: 'IPv4' | 'IPv6';
  /** addr:port ([addr]:port for IPv6), as the backend is written in the map. */
  backend: string;
  protocol: string;
  /** Sockets the socket LB connected to it (a count that drifted below 0 reads 0). */
  socket: number;
  /** Open tc flows to it. */
  tc: number;
}

export function readBackendConnections(families: readonly FamilyMaps[]): BackendConnectionsRow[] {
  const rows: BackendConnectionsRow[] = [];
  for (const f of families) {
    if (!f.conns) continue;
    for (const [id, c] of f.conns.entries()) {
      const socket = c.sock > 0n ? Number(c.sock) : 0;
      const tc = c.tc > 0n ? Number(c.tc) : 0;
      if (socket === 0 && tc === 0) continue;
      const be = f.backends.get(id);
      if (!be) continue; // removed between the two reads; its count goes with it
      rows.push({
        family: f.family === 6 ? 'IPv6' : 'IPv4',
        backend: f.family === 6 ? `[${be.addr}]:${be.port}` : `${be.addr}:${be.port}`,
        protocol: protoName(be.proto),
        socket,
        tc,
      });
    }
  }
  return rows;
}
