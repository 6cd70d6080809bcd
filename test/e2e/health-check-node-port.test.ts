// healthCheckNodePort as a load balancer sees it, as the upstream spec
// "Services should fail health check node port if there are only
// terminating endpoints" checks it: a LoadBalancer Service with
// externalTrafficPolicy Local and its one endpoint on node1 (through the file
// source), the agent inside node1's namespace (started with --healthz-bind-address
// 127.0.0.1, which must not narrow the health-check servers), and an outside
// client that asks node1's health-check port over IPv4 and IPv6. Ready: 200
// and one local endpoint. The endpoint turns terminating (still serving):
// 503 and zero, while the NodePort still reaches the terminating pod (the
// fallback). Ready again: 200. Every address lives in namespaces this test
// made; every step waits for the agent's sync or log line.
import t from 'tap';
import { stringify } from 'yaml';
import type { Lab, LabClient, LabPod } from '../../lab/index.ts';
import { hostPort } from '../../lab/protocol.ts';
import { HC_LISTENING } from '../../src/agent/http/health-check-ports.ts';
import { type EndpointSpec, type ServiceSpec, serviceObject, sliceObject } from './fixtures/manifests.ts';
import { NODE1_POD, NODE_IPS, type NodeAgent, V6_IPS, oneDualStackNode, startNodeAgent } from './fixtures/tc-nodes.ts';

const HC_PORT = 32000;
const NODE_PORT = 30081;
const FAMILIES = [
  { family: 4, node: NODE_IPS.node1 },
  { family: 6, node: V6_IPS.node1 },
] as const;

/** The Service, its two slices (one per family) and node1, with the pod's endpoints in the given state. */
function manifest(state: Pick<EndpointSpec, 'ready' | 'serving' | 'terminating'>): string {
  const svc: ServiceSpec = {
    name: 'lb-local',
    clusterIP: '10.96.0.11',
    clusterIP6: 'fd00:10:96::11',
    type: 'LoadBalancer',
    externalTrafficPolicy: 'Local',
    ports: [{ name: 'http', protocol: 'TCP', port: 80, targetPort: 8080, nodePort: NODE_PORT }],
    endpoints: [{ ip: NODE1_POD.ip, nodeName: 'node1', ...state }],
    endpoints6: [{ ip: NODE1_POD.ip6, nodeName: 'node1', ...state }],
    extraSpec: { healthCheckNodePort: HC_PORT },
  };
  const node = {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: { name: 'node1' },
    status: {
      addresses: [
        { type: 'InternalIP', address: NODE_IPS.node1 },
        { type: 'InternalIP', address: V6_IPS.node1 },
      ],
    },
  };
  return [serviceObject(svc), sliceObject(svc), sliceObject(svc, 'v6abc', svc.endpoints6, 'IPv6'), node]
    .map((d) => stringify(d))
    .join('---\n');
}

let lab: Lab;
let clientPod: LabPod;
let client: LabClient;
let node1: NodeAgent;

t.before(async () => {
  const one = await oneDualStackNode();
  lab = one.lab;
  clientPod = one.clientPod;
  const node = one.node;
  client = await lab.client(clientPod);
  node1 = await startNodeAgent(lab, node, 'node1', { 'lb.yaml': manifest({ ready: true }) }, ['--healthz-bind-address', '127.0.0.1:0']);
  await node1.agent.waitFor((l) => l.msg === HC_LISTENING && l.port === HC_PORT, {
    timeoutMs: 30000,
    what: 'the healthCheckNodePort server',
  });
});

t.teardown(async () => {
  try {
    await node1?.stop();
  } finally {
    await lab?.destroy();
  }
});

interface Answer {
  status: number;
  contentType: string | null;
  nosniff: string | null;
  weight: string | null;
  body: string;
}

/** GET http://node:HC_PORT/healthz from the outside client, as a load balancer's check does. */
async function check(ip: string): Promise<Answer> {
  const script = `fetch('http://${hostPort(ip, HC_PORT)}/healthz').then(async (r) => console.log(JSON.stringify({
    status: r.status, contentType: r.headers.get('content-type'), nosniff: r.headers.get('x-content-type-options'),
    weight: r.headers.get('x-load-balancing-endpoint-weight'), body: await r.text() })))`;
  return JSON.parse(await lab.exec(clientPod, process.execPath, ['-e', script])) as Answer;
}

/** kube-proxy's body (pkg/proxy/healthcheck): tab-indented, no final newline; written out here, not built by svcmap's code. */
const body = (n: number) =>
  `{\n\t"service": {\n\t\t"namespace": "default",\n\t\t"name": "lb-local"\n\t},\n\t"localEndpoints": ${n},\n\t"serviceProxyHealthy": true\n}`;

t.test('a ready local endpoint: 200 over both families, though the agent was given --healthz-bind-address 127.0.0.1:0', async (t) => {
  for (const f of FAMILIES) {
    const a = await check(f.node);
    t.same(a, { status: 200, contentType: 'application/json', nosniff: 'nosniff', weight: '1', body: body(1) }, `IPv${f.family}`);
  }
});

t.test('the only endpoint terminating (still serving): 503 with 0 local endpoints; the NodePort still reaches it', async (t) => {
  await node1.writeManifest('lb.yaml', manifest({ ready: false, serving: true, terminating: true }));
  for (const f of FAMILIES) {
    const a = await check(f.node);
    t.same(a, { status: 503, contentType: 'application/json', nosniff: 'nosniff', weight: '0', body: body(0) }, `IPv${f.family}`);
    const r = await client.tcpConnect({ ip: f.node, port: NODE_PORT, count: 4, timeoutMs: 2000 });
    t.equal(r.ok, 4, `IPv${f.family}: NodePort to the terminating pod: ${JSON.stringify(r.errors)}`);
    t.same(Object.keys(r.byPod), ['pod-a']);
  }
});

t.test('a terminating endpoint that no longer serves: 503', async (t) => {
  await node1.writeManifest('lb.yaml', manifest({ ready: false, serving: false, terminating: true }));
  for (const f of FAMILIES) {
    const a = await check(f.node);
    t.equal(a.status, 503, `IPv${f.family}`);
    t.equal(a.weight, '0');
  }
});

t.test('ready again: 200', async (t) => {
  await node1.writeManifest('lb.yaml', manifest({ ready: true }));
  for (const f of FAMILIES) {
    const a = await check(f.node);
    t.same({ status: a.status, weight: a.weight, body: a.body }, { status: 200, weight: '1', body: body(1) }, `IPv${f.family}`);
  }
});
