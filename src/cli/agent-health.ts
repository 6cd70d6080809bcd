// What the running agent says about itself at /healthz, for svcmap status:
// the pins say what the kernel holds, only the agent knows which API server
// it watches through, and its --lb-mode. An agent that does not answer is said so, not an error:
// status answers whether or not an agent runs.

import { type LbMode, LB_MODES } from '../maps/constants.ts';

export type AgentAnswer =
  | { healthz: string; healthy: boolean; ready: boolean; apiServer?: string; apiServerFailovers?: number; lbMode?: LbMode }
  | { healthz: string; error: string };

export async function askAgent(address: string, timeoutMs = 2000): Promise<AgentAnswer> {
  const healthz = `http://${address}/healthz`;
  try {
    // 503 (unhealthy, or the node being deleted) still carries the JSON.
    const res = await fetch(healthz, { signal: AbortSignal.timeout(timeoutMs) });
    const body = (await res.json()) as {
      healthy?: unknown;
      ready?: unknown;
      apiServer?: unknown;
      apiServerFailovers?: unknown;
      lbMode?: unknown;
    };
    return {
      healthz,
      healthy: body.healthy === true,
      ready: body.ready === true,
      ...(typeof body.apiServer === 'string' ? { apiServer: body.apiServer } : {}),
      ...(typeof body.apiServerFailovers === 'number' ? { apiServerFailovers: body.apiServerFailovers } : {}),
      ...((LB_MODES as readonly unknown[]).includes(body.lbMode) ? { lbMode: body.lbMode as LbMode } : {}),
    };
  } catch (err) {
    const e = err as Error & { cause?: { code?: string } };
    return { healthz, error: e.cause?.code ?? (e.name === 'TimeoutError' ? `no answer in ${timeoutMs / 1000}s` : e.message) };
  }
}

/** One line for status's header. */
export function describeAgent(a: AgentAnswer): string {
  if ('error' in a) return `agent: not answering at ${a.healthz} (${a.error})`;
  const api = a.apiServer === undefined ? '' : `; API server ${a.apiServer} (failovers: ${a.apiServerFailovers ?? 0})`;
  return `agent: ${a.healthy ? 'healthy' : 'unhealthy'}, ${a.ready ? 'ready' : 'not ready'}${api}`;
}
