// Stale connected UDP sockets, end to end, for each family (dual-stack
// Services through their IPv4 and their IPv6 VIPs): the real agent on a cgroup of the
// test's own, a client pod (a network namespace of its own, in that cgroup)
// holding connected UDP sockets that send every 50 ms, and the Service's
// endpoints rewritten under them. The socket the socket LB sent to the
// removed pod gets ECONNABORTED (bpf_sock_destroy, run by the agent inside
// the client's namespace) and, connected again, reaches a live pod; the
// sockets that must stay do: one connected to the same pod's IP directly,
// one sent through the same VIP to a pod that stays, one sent to the
// removed pod through another VIP it still belongs to. Last, with
// --netns-dir the agent finds the client's namespace through a bind-mounted
// namespace file (as the chart has it, the container runtime's pinned
// namespaces) instead of through the cgroup's processes.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { AgentProcess } from '../../lab/agent-process.ts';
import { registerTeardown, unregisterTeardown } from '../../lab/index.ts';
import { netnsPath } from '../../lab/netns.ts';
import type { UdpStreamResult, UdpStreamStarted } from '../../lab/protocol.ts';
import { BtfFile } from '../../src/bpf/btf.ts';
import { compileBpf } from '../../src/bpf/compile.ts';
import { structDrift } from '../../src/maps/btf-check.ts';
import { sockTerm6Key, sockTermKey } from '../../src/maps/codecs.ts';
import { IPPROTO_TCP, IPPROTO_UDP, SVC_SCOPE_EXT } from '../../src/maps/constants.ts';
import { DatapathMaps } from '../../src/maps/datapath-maps.ts';
import {
  type Cluster,
  FAMILIES,
  type FamilyCase,
  POD_IPS,
  POD_IPS6,
  UDP_PORT,
  dualStackEchoService,
  startCluster,
} from './fixtures/cluster.ts';

const [DNS, OTHER] = [60, 61];
/** Pods by index into POD_IPS / POD_IPS6. */
const [POD_A, POD_B, POD_C] = [0, 1, 2];
const pods = (ix: number[]) => ({ endpoints: ix.map((i) => ({ ip: POD_IPS[i]! })), endpoints6: ix.map((i) => ({ ip: POD_IPS6[i]! })) });
const dns = (endpoints: number[]) => dualStackEchoService('dns', DNS, pods(endpoints));
const other = dualStackEchoService('other', OTHER, pods([POD_A]));
const STREAM = { port: 53, intervalMs: 50, timeoutMs: 1000 };
/** Errors other than a late reply (a loaded machine may delay one). */
const errorsBut = (r: UdpStreamResult) => Object.fromEntries(Object.entries(r.errors).filter(([e]) => e !== 'ETIMEDOUT'));
/**
 * What a connected UDP socket that svcmap destroyed tells its owner: the
 * pending ECONNABORTED when the owner reads it first, or EDESTADDRREQ when a
 * send comes first (the kernel has already disconnected the socket; only a
 * destroy does that to a socket connect()ed once). Which one is a race
 * inside the client (the hunt under load saw both); either is the destroy.
 */
const ABORTED = ['ECONNABORTED', 'EDESTADDRREQ'];
const aborts = (r: UdpStreamResult) => ABORTED.reduce((n, code) => n + (r.errors[code] ?? 0), 0);

let c: Cluster;
/** Whether the running agent was started with --destroy-tcp-sockets. */
let tcpFlag = false;
t.before(async () => {
  c = await startCluster([dns([POD_A, POD_B]), other], { ipv6: true });
  await c.startAgent();
});
t.teardown(async () => {
  await c?.destroy();
});

async function metric(name: string, labels: string): Promise<number> {
  const up = await c.agent.waitFor((l) => l.msg === 'serving metrics and health', { what: 'metrics port' });
  const text = await (await fetch(`http://127.0.0.1:${String(up.metricsPort)}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name}{${labels}}`));
  return line === undefined ? Number.NaN : Number(line.split(' ').at(-1));
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The backend addresses of a frontend of the family, read from the pinned maps. */
function backendsOf(f: FamilyCase, vip: string, port: number, proto: number): string[] {
  const maps = DatapathMaps.openPinned(c.pinDir);
  try {
    const fm = maps.family(f.family)!;
    const key = { addr: vip, port, proto, scope: SVC_SCOPE_EXT, slot: 0 };
    const master = fm.services.get(key);
    if (!master) return [];
    const out: string[] = [];
    for (let slot = 1; slot <= master.count; slot++) {
      const id = fm.services.get({ ...key, slot })?.backend_id;
      const be = id === undefined ? undefined : fm.backends.get(id);
      if (be) out.push(be.addr);
    }
    return out.sort();
  } finally {
    maps.close();
  }
}

/** Rewrites the dns Service and waits until both its ports of both families hold exactly these pods in the maps. */
async function setDns(endpoints: number[]): Promise<void> {
  await c.writeService(dns(endpoints));
  const synced = () =>
    FAMILIES.every((f) => {
      const want = JSON.stringify(endpoints.map((i) => f.pods[i]!).sort());
      return [
        [53, IPPROTO_UDP],
        [80, IPPROTO_TCP],
      ].every(([port, proto]) => JSON.stringify(backendsOf(f, f.vip(DNS), port!, proto!)) === want);
    });
  for (let i = 0; i < 200; i++) {
    if (synced()) return;
    await sleep(50);
  }
  throw new Error(`the dns Service did not reach pods ${JSON.stringify(endpoints)} in the maps`);
}

t.test('the codecs of the socket termination keys match bpf/sock_destroy.c', async (t) => {
  const btf = new BtfFile(compileBpf({ program: 'sock_destroy' }).path);
  t.teardown(() => btf.close());
  t.same(
    structDrift(sockTermKey.layout, (n) => btf.struct(n)),
    [],
  );
  t.same(
    structDrift(sockTerm6Key.layout, (n) => btf.struct(n)),
    [],
    'and of the IPv6 one',
  );
});

t.test('the agent turned socket termination on', async (t) => {
  const on = await c.agent.waitFor((l) => typeof l.msg === 'string' && l.msg.startsWith('socket termination'), {
    what: 'socket termination',
  });
  t.match(on.msg, /^socket termination on/, JSON.stringify(on));
  t.equal(await metric('svcmap_sockets_destroyed_total', 'proto="udp"'), 0, 'nothing destroyed yet');
});

for (const f of FAMILIES) {
  t.test(`IPv${f.family}: a connected UDP socket sent to a removed pod is destroyed and reconnects; the others stay`, async (t) => {
    // Where the family before left the Services.
    if (!existsSync(join(c.manifests, 'other.yaml'))) await c.writeService(other);
    await setDns([POD_A, POD_B]);
    // Two sockets through the VIP, one on pod-a and one on pod-b: the pod is
    // the socket LB's random choice, so open sockets until both are found.
    const started: UdpStreamStarted[] = [];
    let toA: UdpStreamStarted | undefined;
    let toB: UdpStreamStarted | undefined;
    for (let i = 0; i < 24 && !(toA && toB); i++) {
      const s = await c.client.udpStreamStart({ ip: f.vip(DNS), ...STREAM });
      started.push(s);
      if (s.pod === 'pod-a' && !toA) toA = s;
      else if (s.pod === 'pod-b' && !toB) toB = s;
    }
    t.ok(toA && toB, `a socket on each pod (${started.map((s) => s.pod).join(', ')})`);
    for (const s of started) if (s !== toA && s !== toB) await c.client.udpStreamStop(s.stream!);
    const direct = await c.client.udpStreamStart({ ip: f.pods[POD_A]!, ...STREAM, port: UDP_PORT });
    const viaOther = await c.client.udpStreamStart({ ip: f.vip(OTHER), ...STREAM });
    t.equal(direct.pod, 'pod-a');
    t.equal(viaOther.pod, 'pod-a');
    await sleep(500);

    const from = c.agent.mark();
    await setDns([POD_B, POD_C]); // pod-a leaves the Service
    const logged = await c.agent.waitFor((l) => l.msg === 'destroyed sockets connected to removed backends', {
      from,
      what: 'sockets destroyed',
    });
    // Five replies on each socket after the run: a destroyed socket has seen it by the second, and goes on on its new one.
    await Promise.all([toA!, toB!, direct, viaOther].map((s) => c.client.udpStreamReplies(s.stream!, 5)));

    const [a, b, d, o] = (await Promise.all([toA!, toB!, direct, viaOther].map((s) => c.client.udpStreamStop(s.stream!)))) as [
      UdpStreamResult,
      UdpStreamResult,
      UdpStreamResult,
      UdpStreamResult,
    ];
    t.match(logged, { destroyed: { udp: 1, tcp: 0 }, failed: 0 }, 'the agent destroyed one UDP socket');
    t.ok((logged.namespaces as number) >= 2, "searching its own namespace and the client pod's");

    // The socket on pod-a: destroyed once, a new socket, then live pods only.
    t.same(
      Object.keys(errorsBut(a)).filter((code) => !ABORTED.includes(code)),
      [],
      `the socket on pod-a got no other error (${JSON.stringify(a.errors)})`,
    );
    t.equal(aborts(a), 1, `the socket on pod-a was destroyed, once (${JSON.stringify(a.errors)})`);
    t.equal(a.reconnects, 1, 'and connected again');
    const abort = a.events.findIndex((e) => e.code !== undefined && ABORTED.includes(e.code));
    const before = a.events.slice(0, abort).filter((e) => e.pod !== undefined);
    const after = a.events.slice(abort + 1).filter((e) => e.pod !== undefined);
    t.ok(before.length >= 5 && before.every((e) => e.pod === 'pod-a'), `before: pod-a only (${before.length} replies)`);
    t.ok(after.length >= 5, `after: it keeps going (${after.length} replies)`);
    t.ok(
      after.every((e) => e.pod === 'pod-b' || e.pod === 'pod-c'),
      `after: a live pod only (${JSON.stringify(a.byPod)})`,
    );
    t.not(a.events.at(-1)!.local, a.events[0]!.local, 'on a new socket');

    // The others: never an error, the same pod throughout, the same socket.
    for (const [name, r, pod] of [
      ['through the VIP on pod-b', b, 'pod-b'],
      ["to pod-a's IP directly", d, 'pod-a'],
      ['to pod-a through the other VIP', o, 'pod-a'],
    ] as const) {
      t.same(errorsBut(r), {}, `the socket ${name} saw no error`);
      t.equal(r.reconnects, 0, `the socket ${name} was not reconnected`);
      t.same(Object.keys(r.byPod), [pod], `the socket ${name} stayed on ${pod}`);
      t.ok(r.byPod[pod]! >= 10, `and kept exchanging (${r.byPod[pod]})`);
    }
    t.equal(await metric('svcmap_sockets_destroyed_total', 'proto="udp"'), 1, 'svcmap_sockets_destroyed_total{proto="udp"} 1');
  });

  t.test(`IPv${f.family}: a Service that goes takes its sockets with it; removing nothing destroys nothing`, async (t) => {
    // One request, answered before the Service goes, then none for 5 s: a
    // reply that arrives between the removal and the run would let recvmsg4
    // drop the socket's entry (its frontend is gone), and the socket would
    // stay (a documented limit); this test is about the removal itself.
    const s = await c.client.udpStreamStart({ ip: f.vip(OTHER), ...STREAM, intervalMs: 5000 });
    t.equal(s.pod, 'pod-a');
    let from = c.agent.mark();
    await setDns([POD_B, POD_C, POD_A]); // an addition only
    await sleep(300);
    t.notOk(
      c.agent.lines.slice(from).some((l) => l.msg === 'destroyed sockets connected to removed backends'),
      'adding a backend destroys nothing',
    );
    from = c.agent.mark();
    await c.removeManifest('other.yaml');
    await c.agent.waitFor((l) => l.msg === 'destroyed sockets connected to removed backends', { from, what: 'sockets destroyed' });
    await sleep(300);
    const r = await c.client.udpStreamStop(s.stream!);
    t.equal(aborts(r), 1, `the socket of the deleted Service was destroyed (${JSON.stringify(r.errors)})`);
    t.equal(await metric('svcmap_sockets_destroyed_total', 'proto="udp"'), 2);
  });

  t.test(`IPv${f.family}: TCP sockets are destroyed only with --destroy-tcp-sockets`, async (t) => {
    if (tcpFlag) {
      c.agent.kill('SIGTERM');
      await c.agent.exited;
      await c.startAgent();
      tcpFlag = false;
    }
    await setDns([POD_A]);
    const udp = await c.client.udpStreamStart({ ip: f.vip(DNS), ...STREAM });
    const tcp = await c.client.udpStreamStart({ ip: f.vip(DNS), ...STREAM, port: 80, tcp: true });
    t.same([udp.pod, tcp.pod], ['pod-a', 'pod-a']);
    let from = c.agent.mark();
    await setDns([POD_B]);
    await c.agent.waitFor((l) => l.msg === 'destroyed sockets connected to removed backends', { from, what: 'sockets destroyed' });
    await Promise.all([udp, tcp].map((s) => c.client.udpStreamReplies(s.stream!, 2)));
    const [u, k] = await Promise.all([c.client.udpStreamStop(udp.stream!), c.client.udpStreamStop(tcp.stream!)]);
    t.equal(aborts(u), 1, `the UDP socket is destroyed (${JSON.stringify(u.errors)})`);
    t.same(errorsBut(k), {}, 'without the flag the TCP connection stays');
    t.equal(k.reconnects, 0);
    t.same(Object.keys(k.byPod), ['pod-a'], 'on its pod');

    c.agent.kill('SIGTERM');
    await c.agent.exited;
    await c.startAgent(['--destroy-tcp-sockets']);
    tcpFlag = true;
    await setDns([POD_A]);
    const tcp2 = await c.client.udpStreamStart({ ip: f.vip(DNS), ...STREAM, port: 80, tcp: true });
    t.equal(tcp2.pod, 'pod-a');
    from = c.agent.mark();
    await setDns([POD_B]);
    const logged = await c.agent.waitFor((l) => l.msg === 'destroyed sockets connected to removed backends', {
      from,
      what: 'sockets destroyed',
    });
    await c.client.udpStreamReplies(tcp2.stream!, 3);
    const k2 = await c.client.udpStreamStop(tcp2.stream!);
    t.match(logged, { destroyed: { udp: 0, tcp: 1 } });
    t.equal(k2.errors.ECONNABORTED, 1, `with the flag the TCP connection gets ECONNABORTED (${JSON.stringify(k2.errors)})`);
    t.equal(k2.reconnects, 1, 'connects again');
    const after = k2.events.slice(k2.events.findIndex((e) => e.code === 'ECONNABORTED') + 1).filter((e) => e.pod !== undefined);
    t.ok(after.length >= 3 && after.every((e) => e.pod === 'pod-b'), `and reaches the live pod (${JSON.stringify(k2.byPod)})`);
    t.equal(await metric('svcmap_sockets_destroyed_total', 'proto="tcp"'), 1, 'svcmap_sockets_destroyed_total{proto="tcp"} 1');
  });
}

t.test("--netns-dir: pods' namespaces are the namespace files in the directory, not the cgroup's processes", async (t) => {
  // The client's namespace bind-mounted twice (searched once), beside a
  // file that is not a namespace (skipped), as a runtime's netns directory
  // can hold an empty file it has not mounted yet.
  const dir = mkdtempSync(join(tmpdir(), 'svcmap-netns-dir-'));
  const files = ['client', 'client-again'].map((n) => join(dir, n));
  const mounted = new Set<string>();
  const unmount = (f: string) => {
    if (!mounted.has(f)) return;
    execFileSync('umount', [f]);
    mounted.delete(f);
  };
  const cleanup = {
    emergency() {
      for (const f of mounted) {
        try {
          execFileSync('umount', ['-l', f], { stdio: 'ignore' });
        } catch {
          /* gone */
        }
      }
      mounted.clear();
      rmSync(dir, { recursive: true, force: true });
    },
  };
  registerTeardown(cleanup);
  t.teardown(() => {
    cleanup.emergency();
    unregisterTeardown(cleanup);
  });
  writeFileSync(join(dir, 'not-a-namespace'), '');
  for (const f of files) {
    writeFileSync(f, '');
    execFileSync('mount', ['--bind', netnsPath(c.clientPod.ns), f]);
    mounted.add(f);
  }

  c.agent.kill('SIGTERM');
  await c.agent.exited;
  await c.startAgent(['--netns-dir', dir]);
  tcpFlag = false;
  const on = await c.agent.waitFor((l) => typeof l.msg === 'string' && l.msg.startsWith('socket termination'), {
    what: 'socket termination',
  });
  t.match(on, { podNamespaces: `the files in ${dir} (--netns-dir, the container runtime's pinned namespaces)` }, String(on.msg));

  /** Sends a connected UDP socket to pod-a through the VIP, takes pod-a out of the Service, and returns the run's log line and the socket's record. */
  const round = async () => {
    await setDns([POD_A]);
    const s = await c.client.udpStreamStart({ ip: FAMILIES[0].vip(DNS), ...STREAM });
    t.equal(s.pod, 'pod-a');
    const from = c.agent.mark();
    await setDns([POD_B]);
    // The run for pod-a's removal (a run for an earlier removal may still be on its way on a loaded machine).
    const podA = `${POD_IPS[POD_A]}:`;
    const run = await c.agent.waitFor(
      (l) =>
        (l.msg === 'destroyed sockets connected to removed backends' || l.msg === 'no socket was connected to the removed backends') &&
        (l.removed as string[] | undefined)?.some((b) => b.startsWith(podA)) === true,
      { from, what: "the termination run for pod-a's removal" },
    );
    // Two more replies after the run: by the second, a socket the run destroyed has seen it.
    await c.client.udpStreamReplies(s.stream!, 2);
    return { run, result: await c.client.udpStreamStop(s.stream!) };
  };

  const one = await round();
  t.match(one.run, { destroyed: { udp: 1, tcp: 0 }, failed: 0, namespaces: 2 }, "the agent's own namespace and the client's, once");
  t.equal(aborts(one.result), 1, `the client's socket to pod-a was destroyed (${JSON.stringify(one.result.errors)})`);

  // Unmounted, the client's namespace is not searched, though its process is still in the hooks' cgroup.
  for (const f of files) unmount(f);
  const two = await round();
  t.match(two.run, { destroyed: { udp: 0, tcp: 0 }, failed: 0, namespaces: 1 }, "only the agent's own namespace");
  t.same(errorsBut(two.result), {}, 'the socket to pod-a was left alone');
  t.same(Object.keys(two.result.byPod), ['pod-a'], 'and stays on pod-a');

  // A directory that is not there: the agent stops at start, saying what to do.
  c.agent.kill('SIGTERM');
  await c.agent.exited;
  const missing = join(dir, 'missing');
  const failed = new AgentProcess([
    '--manifests',
    c.manifests,
    '--cgroup',
    c.cgroup,
    '--pin-dir',
    c.pinDir,
    '--node-name',
    'node',
    '--metrics-bind-address',
    '127.0.0.1:0',
    '--healthz-bind-address',
    '127.0.0.1:0',
    '--netns-dir',
    missing,
  ]);
  t.not(await failed.exited, 0, 'the agent exits with an error');
  t.match(
    failed.stderr,
    `--netns-dir ${missing}: cannot read it (ENOENT); mount the container runtime's netns directory there (the chart mounts the host's /var/run/netns), or leave the flag out`,
  );
});
