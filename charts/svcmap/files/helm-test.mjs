// `helm test` for svcmap: from an ordinary pod (pod network, no host
// network), prove that Service addresses are translated on this cluster,
// which has no kube-proxy:
//   1. DNS through the kube-dns Service ClusterIP (UDP from the pod's
//      resolver): kubernetes.default.svc must resolve to the ClusterIP that
//      the kubelet put in KUBERNETES_SERVICE_HOST;
//   2. TCP to the kubernetes Service ClusterIP: TLS handshake with the
//      cluster CA and GET /version answered by the API server.
// Plain Node (no packages) so it runs from the chart's ConfigMap.
import { lookup } from 'node:dns/promises';
import { existsSync, readFileSync } from 'node:fs';
import https from 'node:https';

const CA_FILE = '/var/run/secrets/kubernetes.io/serviceaccount/ca.crt';
const ATTEMPTS = 10;
const DELAY_MS = 3000;

const host = process.env.KUBERNETES_SERVICE_HOST;
const port = Number(process.env.KUBERNETES_SERVICE_PORT ?? '443');

function log(msg) {
  process.stdout.write(`svcmap-test: ${msg}\n`);
}

async function retry(what, fn) {
  let lastErr;
  for (let i = 1; i <= ATTEMPTS; i++) {
    try {
      return await fn();
    } catch (err) {
      lastErr = err;
      log(`${what}: attempt ${i}/${ATTEMPTS} failed: ${err.message}`);
      if (i < ATTEMPTS) await new Promise((r) => setTimeout(r, DELAY_MS));
    }
  }
  throw new Error(`${what}: ${lastErr?.message}`);
}

function getVersion(ip) {
  const options = { host: ip, port, path: '/version', timeout: 5000, servername: 'kubernetes.default.svc' };
  if (existsSync(CA_FILE)) options.ca = readFileSync(CA_FILE);
  else options.rejectUnauthorized = false;
  return new Promise((resolve, reject) => {
    const req = https.get(options, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c) => (body += c));
      res.on('end', () => {
        if (res.statusCode !== 200) reject(new Error(`HTTP ${res.statusCode}: ${body.slice(0, 200)}`));
        else resolve(JSON.parse(body));
      });
    });
    req.on('timeout', () => req.destroy(new Error(`no answer from ${ip}:${port} within 5s`)));
    req.on('error', reject);
  });
}

try {
  if (!host) throw new Error('KUBERNETES_SERVICE_HOST is not set: is this running in a pod?');
  log(`kubernetes Service ClusterIP from the kubelet: ${host}:${port}`);

  const addr = await retry('DNS lookup of kubernetes.default.svc through kube-dns', async () => {
    const r = await lookup('kubernetes.default.svc', { family: host.includes(':') ? 6 : 4 });
    return r.address;
  });
  if (addr !== host) {
    throw new Error(`kubernetes.default.svc resolved to ${addr}, expected the ClusterIP ${host}`);
  }
  log(`DNS through the kube-dns Service: kubernetes.default.svc -> ${addr} (ok)`);

  const version = await retry(`HTTPS GET /version at ClusterIP ${host}:${port}`, () => getVersion(host));
  log(`TCP through the ClusterIP ${host}:${port}: API server ${version.gitVersion ?? '?'} answered (ok)`);
  log('PASS: Services are reachable through their ClusterIPs');
} catch (err) {
  process.stderr.write(`svcmap-test: FAIL: ${err.message}\n`);
  process.stderr.write(
    'svcmap-test: check the agents: kubectl -n <namespace> get pods -l app.kubernetes.io/name=svcmap; ' +
      'kubectl -n <namespace> exec ds/<release> -- svcmap status\n',
  );
  process.exit(1);
}
