// make demo: a small cluster of network namespaces on this machine, the real
// svcmap agent on a cgroup of its own, and real TCP and UDP traffic to two
// ClusterIP services, one of them dual-stack and reached over both families. Everything it creates lives in namespaces it made and
// is removed on exit, on error and on Ctrl-C.
import { execFileSync } from 'node:child_process';
import { cpSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { AgentProcess, SVCMAP, assertBuilt } from '../lab/agent-process.ts';
import { Lab, registerTeardown, unregisterTeardown } from '../lab/index.ts';
import { cleanupPins } from '../src/cli/cleanup.ts';
import { ensureBpffs as mountBpffs, labPinDir, sweepStalePins } from '../lab/pins.ts';

const MANIFESTS = fileURLToPath(new URL('./manifests', import.meta.url));
const PODS = [
  ['pod-a', '10.244.0.11', 'fd00:10:244::11'],
  ['pod-b', '10.244.0.12', 'fd00:10:244::12'],
  ['pod-c', '10.244.0.13', 'fd00:10:244::13'],
] as const;
/** The node bridge's and the client's IPv6 addresses (unique local: inside the demo's namespaces only). */
const NODE_IP6 = 'fd00:10:244::1';
const CLIENT_IP6 = 'fd00:10:244::100';
const TARGETS = [
  { what: 'web  10.96.0.10:80/TCP', ip: '10.96.0.10', port: 80, proto: 'tcp' },
  { what: 'web  [fd00:10:96::a]:80/TCP (the same Service over IPv6)', ip: 'fd00:10:96::a', port: 80, proto: 'tcp' },
  { what: 'dns  10.96.0.53:53/UDP', ip: '10.96.0.53', port: 53, proto: 'udp' },
  { what: 'dns  10.96.0.53:53/TCP', ip: '10.96.0.53', port: 53, proto: 'tcp' },
] as const;

const say = (s: string) => process.stdout.write(`${s}\n`);

function bar(n: number, total: number): string {
  return '#'.repeat(Math.round((40 * n) / total));
}

async function main(): Promise<void> {
  if (process.getuid?.() !== 0) throw new Error('make demo needs root (network namespaces, cgroups, BPF)');
  assertBuilt();
  mountBpffs();
  for (const p of sweepStalePins()) say(`removed pins an earlier run left: ${p}`);

  const lab = await Lab.create({ prefix: 'demo' });
  const pinDir = labPinDir(lab.id, '', 'demo');
  const manifests = mkdtempSync(join(tmpdir(), 'svcmap-demo-'));
  cpSync(MANIFESTS, manifests, { recursive: true });
  let agent: AgentProcess | undefined;
  const teardown = {
    emergency() {
      agent?.kill('SIGKILL');
      try {
        cleanupPins(pinDir);
      } catch {
        /* best effort */
      }
      rmSync(manifests, { recursive: true, force: true });
    },
  };
  registerTeardown(teardown); // Ctrl-C and crashes: the lab re-raises after cleaning up

  try {
    say(`\n== 1. a cluster of network namespaces (run ${lab.id})`);
    const node = await lab.node('node', { cidr: '10.244.0.0/24' });
    await lab.ipv6(node, NODE_IP6, { dev: node.bridge });
    for (const [name, ip, ip6] of PODS) {
      const pod = await lab.pod(node, name, ip);
      await lab.ipv6(pod, ip6, { dev: pod.ifname, gateway: NODE_IP6 });
      await lab.echoServer(pod, { tcpPorts: [8080, 5353], udpPorts: [5353] });
      await lab.echoServer(pod, { tcpPorts: [8080], udpPorts: [], host: ip6 });
      say(`   ${name}  ${ip}  ${ip6}  echo servers on TCP 8080, 5353 and UDP 5353 (IPv6: TCP 8080)`);
    }
    const clientPod = await lab.pod(node, 'client', '10.244.0.100');
    await lab.ipv6(clientPod, CLIENT_IP6, { dev: clientPod.ifname, gateway: NODE_IP6 });
    const cgroup = await lab.cgroup('demo');
    const client = await lab.client(clientPod, { cgroup });
    say(`   client 10.244.0.100 ${CLIENT_IP6}, its process in cgroup ${cgroup}`);
    say('   (the VIPs 10.96.0.x and fd00:10:96::x exist nowhere: no route, no address; only svcmap makes them work)');

    say(`\n== 2. svcmap agent --manifests ${MANIFESTS} --cgroup ${cgroup}`);
    agent = new AgentProcess([
      '--manifests',
      manifests,
      '--cgroup',
      cgroup,
      '--pin-dir',
      pinDir,
      '--node-name',
      'demo-node',
      '--metrics-bind-address',
      '127.0.0.1:0',
      '--healthz-bind-address',
      '127.0.0.1:0',
    ]);
    const synced = await agent.waitForSync(0, 60000);
    const up = agent.lines.find((l) => String(l.msg).startsWith('datapath up'));
    say(`   BPF objects: ${(up?.objects as string[] | undefined)?.join(', ') ?? '?'}`);
    say(`   synced ${String(synced.frontends)} frontends in ${String(synced.durationMs)} ms`);

    say('\n== 3. 100 connections / datagrams to each VIP, from the client namespace');
    for (const t of TARGETS) {
      const r =
        t.proto === 'tcp'
          ? await client.tcpConnect({ ip: t.ip, port: t.port, count: 100, timeoutMs: 2000, concurrency: 4 })
          : await client.udpSend({ ip: t.ip, port: t.port, count: 100, connected: false, timeoutMs: 2000 });
      say(`   ${t.what}: ${r.ok} ok, ${r.failed} failed${r.failed ? ` ${JSON.stringify(r.errors)}` : ''}`);
      for (const [name] of PODS) {
        const n = r.byPod[name] ?? 0;
        say(`      ${name} ${String(n).padStart(4)}  ${bar(n, 100)}`);
      }
      if ('replySources' in r) say(`      replies came from ${r.replySources.join(', ')} (the VIP, not the pod)`);
      if ('peerNames' in r) say(`      getpeername() said ${r.peerNames.join(', ')}`);
    }

    say('\n== 4. svcmap dump');
    process.stdout.write(execFileSync(SVCMAP, ['dump', '--pin-dir', pinDir], { encoding: 'utf8' }).replace(/^/gm, '   '));
    say('\n== 5. svcmap status');
    process.stdout.write(execFileSync(SVCMAP, ['status', '--pin-dir', pinDir], { encoding: 'utf8' }).replace(/^/gm, '   '));
  } finally {
    say('\n== 6. cleaning up: agent, programs, pins, namespaces, cgroup');
    if (agent) {
      agent.kill('SIGTERM');
      await Promise.race([agent.exited, new Promise((r) => setTimeout(r, 3000))]);
      agent.kill('SIGKILL');
    }
    const removed = cleanupPins(pinDir);
    rmSync(manifests, { recursive: true, force: true });
    unregisterTeardown(teardown);
    await lab.destroy();
    say(`   removed ${removed.length} pins; namespaces and cgroup deleted`);
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`demo failed: ${(err as Error)?.stack ?? String(err)}\n`);
  process.exitCode = 1;
});
