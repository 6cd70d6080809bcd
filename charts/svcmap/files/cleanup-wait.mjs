// svcmap pre-delete hook: wait until the cleanup DaemonSet has a ready pod
// on every node it runs on. A cleanup pod turns ready only after
// `svcmap cleanup` succeeded on its node, so when this exits 0 every node is
// clean and `helm uninstall` may go on deleting the agent.
//
// Plain Node (no packages) so it runs from the chart's ConfigMap in the
// svcmap image. Talks to the API server at API_SERVER directly (the chart's
// k8sServiceHost), never through the kubernetes Service ClusterIP: that
// address stops working on a node as soon as its cleanup pod has run.
//
// Environment:
//   API_SERVER       https://host:port (http:// only for tests)
//   NAMESPACE, DAEMONSET  the DaemonSet to watch
//   TIMEOUT_SECONDS  give up after this long (default 300)
//   POLL_MS          poll interval (default 2000)
//   TOKEN_FILE, CA_FILE  service account credentials (in-cluster defaults)
import { existsSync, readFileSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';

const SA_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';
const env = process.env;
const apiServer = env.API_SERVER;
const namespace = env.NAMESPACE;
const name = env.DAEMONSET;
const timeoutMs = Number(env.TIMEOUT_SECONDS ?? '300') * 1000;
const pollMs = Number(env.POLL_MS ?? '2000');
const tokenFile = env.TOKEN_FILE ?? `${SA_DIR}/token`;
const caFile = env.CA_FILE ?? `${SA_DIR}/ca.crt`;

function log(msg) {
  process.stdout.write(`svcmap-cleanup-wait: ${msg}\n`);
}

function fail(msg) {
  process.stderr.write(`svcmap-cleanup-wait: error: ${msg}\n`);
  process.exit(1);
}

if (!apiServer || !namespace || !name) fail('API_SERVER, NAMESPACE and DAEMONSET must be set');
if (!Number.isFinite(timeoutMs) || timeoutMs <= 0) fail(`bad TIMEOUT_SECONDS: ${env.TIMEOUT_SECONDS}`);
if (!Number.isFinite(pollMs) || pollMs <= 0) fail(`bad POLL_MS: ${env.POLL_MS}`);

function getJSON(path) {
  const url = new URL(path, apiServer);
  const headers = { accept: 'application/json' };
  // Projected tokens rotate: read it for every request.
  if (existsSync(tokenFile)) headers.authorization = `Bearer ${readFileSync(tokenFile, 'utf8').trim()}`;
  const isHttps = url.protocol === 'https:';
  const options = { headers, timeout: 10_000 };
  if (isHttps && existsSync(caFile)) options.ca = readFileSync(caFile);
  return new Promise((resolve, reject) => {
    const req = (isHttps ? https : http).get(url, options, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk) => (body += chunk));
      res.on('end', () => {
        if (res.statusCode !== 200) {
          reject(new Error(`GET ${url.pathname}: HTTP ${res.statusCode}: ${body.slice(0, 300)}`));
          return;
        }
        try {
          resolve(JSON.parse(body));
        } catch (err) {
          reject(new Error(`GET ${url.pathname}: bad JSON: ${err.message}`));
        }
      });
    });
    req.on('timeout', () => req.destroy(new Error(`GET ${url.pathname}: timed out`)));
    req.on('error', reject);
  });
}

// progress(ds) -> [every node cleaned?, text for the log]
function progress(ds) {
  const st = ds.status ?? {};
  const generation = ds.metadata?.generation ?? 0;
  const observed = st.observedGeneration ?? 0;
  const desired = st.desiredNumberScheduled ?? 0;
  const ready = st.numberReady ?? 0;
  const updated = st.updatedNumberScheduled ?? 0;
  const text = `${ready}/${desired} nodes cleaned (updated ${updated}, generation ${observed}/${generation})`;
  const finished = observed >= generation && observed > 0 && ready >= desired && updated >= desired;
  return [finished, text];
}

const path = `/apis/apps/v1/namespaces/${encodeURIComponent(namespace)}/daemonsets/${encodeURIComponent(name)}`;
const deadline = Date.now() + timeoutMs;
let last = '';
log(`waiting up to ${timeoutMs / 1000}s for DaemonSet ${namespace}/${name} to be ready on every node`);
for (;;) {
  let text;
  try {
    const [finished, t] = progress(await getJSON(path));
    text = t;
    if (finished) {
      log(`every node is clean: ${text}`);
      process.exit(0);
    }
  } catch (err) {
    text = `not yet readable: ${err.message}`;
  }
  if (text !== last) log(text);
  last = text;
  if (Date.now() >= deadline) {
    fail(
      `timed out after ${timeoutMs / 1000}s: ${last}. ` +
        `Look at the pods of DaemonSet ${namespace}/${name} (kubectl -n ${namespace} logs ds/${name}); ` +
        'to retry, run helm uninstall again.',
    );
  }
  await new Promise((r) => setTimeout(r, pollMs));
}
