// Load-balancing quality: the rolling-update scenario from the kube-proxy
// documentation. A service with backends X and Y and 200 long-lived
// connections; X is replaced by Z (Z becomes an endpoint, X stops being one,
// then X's pod goes away, breaking its connections); the broken clients
// reconnect through the VIP. With a per-connection uniform random pick the
// reconnecting half splits between Y and Z, so Y ends with ~3/4 of the
// connections: max/mean ~1.5, where 1.0 is an even spread. Run for every
// algorithm the datapath has (svcmap.io/lb-algorithm on the Service), the
// same trials each; each trial rotates the roles. The holder is one client
// pod, so sh and maglev (which hash the client's network namespace) and dh
// (the frontend) put every connection on one backend: reported as they come.
import { type ConnHolder, type ConnHolderStats, type EchoServer, type LabPod } from '../lab/index.ts';
import type { BenchCluster } from './cluster.ts';
import { isSyncDone } from './agent.ts';
import { rewriteServiceFile } from './manifests.ts';
import { type BenchService, PORT, TARGET_PORT } from './workload.ts';
import { LB_ALGORITHM_NAMES } from '../src/maps/constants.ts';

const PODS: Array<[string, string]> = [
  ['lb-x', '10.244.0.21'],
  ['lb-y', '10.244.0.22'],
  ['lb-z', '10.244.0.23'],
];
const LB_SERVICE: BenchService = { index: 0, name: 'lb-rolling', vip: '10.111.0.1', endpoints: [] };

export interface LbTrial {
  replaced: string;
  kept: string;
  added: string;
  before: Record<string, number>;
  after: Record<string, number>;
  /** Open connections per remaining backend as the servers count them. */
  serverOpen: Record<string, number>;
  reconnects: number;
  maxOverMean: number;
}

export interface LbResult {
  algorithm: string;
  connections: number;
  trials: LbTrial[];
  /** Mean over trials of the kept backend's share / the added backend's share. */
  keptShare: number;
  addedShare: number;
  maxOverMean: number;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function startHolder(c: BenchCluster, pod: LabPod, ip: string, count: number): Promise<ConnHolder> {
  return c.lab.connHolder(pod, { ip, port: PORT, count }, { cgroup: c.cgSvcmap });
}

/** Waits until every connection is open and the counts stay the same for `quietMs`. */
async function settle(h: ConnHolder, count: number, quietMs: number, timeoutMs: number): Promise<ConnHolderStats> {
  const deadline = performance.now() + timeoutMs;
  let last = '';
  let since = performance.now();
  for (;;) {
    const s = await h.stats();
    const key = JSON.stringify(s.byPod);
    if (key !== last) {
      last = key;
      since = performance.now();
    }
    if (s.open === count && s.connecting === 0 && performance.now() - since >= quietMs) return s;
    if (performance.now() > deadline) throw new Error(`lb: connections did not settle: ${JSON.stringify(s)}`);
    await sleep(100);
  }
}

export async function runLbQuality(
  c: BenchCluster,
  o: { connections: number; trials: number; agentTimeoutMs: number; log: (s: string) => void; algorithms?: readonly string[] },
): Promise<LbResult[]> {
  const pods: LabPod[] = [];
  for (const [name, ip] of PODS) pods.push(await c.lab.pod(c.node, name, ip));
  const servers = new Map<string, EchoServer>();
  const ensureServer = async (p: LabPod) => {
    const s = servers.get(p.name);
    if (s && s.process.exitCode === null && s.process.signalCode === null) return;
    servers.set(p.name, await c.lab.echoServer(p, { tcpPorts: [TARGET_PORT], cpu: c.cpu }));
  };
  let current: string | undefined;
  const setEndpoints = async (algorithm: string, ips: string[]) => {
    const want = `${algorithm} ${ips.join()}`;
    if (current === want) return; // a trial starts where the last one ended
    const svc: BenchService = { ...LB_SERVICE, endpoints: ips, annotations: { 'svcmap.io/lb-algorithm': algorithm } };
    if (!current) {
      await c.programSvcmap([svc], o.agentTimeoutMs);
    } else {
      const from = c.agent!.mark();
      rewriteServiceFile(c.manifests, [svc], svc);
      await c.agent!.waitFor((l) => isSyncDone(l) && l.changed !== 0, { from, timeoutMs: o.agentTimeoutMs, what: 'the endpoint change' });
    }
    current = want;
  };

  const results: LbResult[] = [];
  for (const algorithm of o.algorithms ?? LB_ALGORITHM_NAMES) {
    const trials: LbTrial[] = [];
    for (let t = 0; t < o.trials; t++) {
      const [x, y, z] = [pods[t % 3]!, pods[(t + 1) % 3]!, pods[(t + 2) % 3]!];
      for (const p of pods) await ensureServer(p);
      await setEndpoints(algorithm, [x.ip, y.ip]);
      const holder = await startHolder(c, c.clientSm, LB_SERVICE.vip, o.connections);
      try {
        const before = await settle(holder, o.connections, 300, 30_000);
        await setEndpoints(algorithm, [y.ip, z.ip]);
        await servers.get(x.name)!.stop();
        const after = await settle(holder, o.connections, 500, 60_000);
        const serverOpen: Record<string, number> = {};
        for (const p of [y, z]) serverOpen[p.name] = (await servers.get(p.name)!.stats()).open;
        const counts = [after.byPod[y.name] ?? 0, after.byPod[z.name] ?? 0];
        const trial: LbTrial = {
          replaced: x.name,
          kept: y.name,
          added: z.name,
          before: before.byPod,
          after: after.byPod,
          serverOpen,
          reconnects: after.reconnects,
          maxOverMean: Math.max(...counts) / (o.connections / 2),
        };
        o.log(
          `lb ${algorithm} trial ${t + 1}: ${x.name} replaced by ${z.name}: ${JSON.stringify(after.byPod)} max/mean ${trial.maxOverMean.toFixed(2)}`,
        );
        trials.push(trial);
      } finally {
        await holder.stop();
      }
    }
    const mean = (f: (t: LbTrial) => number) => trials.reduce((a, t) => a + f(t), 0) / trials.length;
    results.push({
      algorithm,
      connections: o.connections,
      trials,
      keptShare: mean((t) => (t.after[t.kept] ?? 0) / o.connections),
      addedShare: mean((t) => (t.after[t.added] ?? 0) / o.connections),
      maxOverMean: mean((t) => t.maxOverMean),
    });
  }
  return results;
}
