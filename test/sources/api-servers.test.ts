// The API servers as a list to move along (api-servers.ts), and which failures
// move the agent (server-failure.ts): the rules the failover test
// (test/e2e/k8s-api-failover.test.ts) relies on, each case on its own.
import t from 'tap';
import { KubeConfig } from '@kubernetes/client-node';
import { ApiServers } from '../../src/sources/kubernetes/api-servers.ts';
import { apiServerUrls } from '../../src/sources/kubernetes/config.ts';
import { whyUnanswered } from '../../src/sources/kubernetes/server-failure.ts';

const A = 'https://10.0.0.10:6443';
const B = 'https://10.0.0.11:6443';
const C = 'https://[fd00::12]:6443';

function kubeConfig(): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'c', server: 'https://10.96.0.1:443', caData: 'Q0E=', skipTLSVerify: false }],
    users: [{ name: 'u', token: 'abc' }],
    contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
    currentContext: 'x',
  });
  return kc;
}

t.test('--k8s-api-server: several URLs, comma-separated, in order; a clear error for one that is not a URL', async (t) => {
  t.same(apiServerUrls(`${A}, ${B}/,${C}`), [A, B, C], 'spaces and trailing slashes dropped, IPv6 kept in brackets');
  t.throws(() => apiServerUrls(`${A},10.0.0.11:6443`), { message: /--k8s-api-server "10\.0\.0\.11:6443" is not a URL/ });
  t.throws(() => apiServerUrls(`${A},ftp://10.0.0.11:6443`), {
    message: /--k8s-api-server "ftp:\/\/10\.0\.0\.11:6443": the scheme must be https/,
  });
  t.throws(() => apiServerUrls(`${A},,${B}`), {
    message: /--k8s-api-server "" is not a URL \(use https:\/\/HOST:PORT, several separated by commas\)/,
  });
});

t.test('the first is used; a failure of the one in use moves to the next, then round to the first; the kubeconfig follows', async (t) => {
  const kc = kubeConfig();
  const s = new ApiServers(kc, [A, B, C]);
  t.equal(s.current, A);
  t.equal(kc.getCurrentCluster()?.server, A, 'requests go to the first');
  t.same(s.failed(A, 'connection refused'), { from: A, to: B, reason: 'connection refused', failovers: 1 });
  t.equal(kc.getCurrentCluster()?.server, B);
  t.equal(kc.getCurrentCluster()?.caData, 'Q0E=', 'the CA is kept');
  t.equal(kc.getCurrentUser()?.token, 'abc', 'the credentials are kept');
  t.equal(s.failed(A, 'connection refused'), undefined, 'a late failure of a server already left moves nothing');
  t.equal(s.current, B);
  t.same(s.failed(B, 'HTTP 503'), { from: B, to: C, reason: 'HTTP 503', failovers: 2 });
  t.same(s.failed(C, 'timed out'), { from: C, to: A, reason: 'timed out', failovers: 3 }, 'after the last, the first again');
  t.equal(s.failovers, 3);
});

t.test('one server: nowhere to move', async (t) => {
  const s = new ApiServers(kubeConfig(), [A]);
  t.equal(s.failed(A, 'connection refused'), undefined);
  t.equal(s.current, A);
  t.equal(s.failovers, 0);
});

t.test('which failures mean the server stopped answering', async (t) => {
  const fetchFailed = (code: string) => Object.assign(new TypeError('fetch failed'), { cause: Object.assign(new Error(code), { code }) });
  const TIMEOUT = 'no answer for 75s';
  t.equal(whyUnanswered(fetchFailed('ECONNREFUSED'), TIMEOUT), 'connection refused');
  t.equal(whyUnanswered(fetchFailed('ECONNRESET'), TIMEOUT), 'connection reset');
  t.equal(whyUnanswered(fetchFailed('EHOSTUNREACH'), TIMEOUT), 'unreachable');
  t.equal(whyUnanswered(fetchFailed('UND_ERR_CONNECT_TIMEOUT'), TIMEOUT), 'timed out');
  t.equal(
    whyUnanswered(new DOMException('The operation was aborted due to timeout', 'TimeoutError'), TIMEOUT),
    TIMEOUT,
    'a watch silent past the bound',
  );
  t.equal(whyUnanswered(Object.assign(new Error('Service Unavailable'), { statusCode: 503 }), TIMEOUT), 'HTTP 503');
  t.equal(whyUnanswered(Object.assign(new Error('Internal Server Error'), { statusCode: 500 }), TIMEOUT), 'HTTP 500');
  for (const code of [401, 403, 404, 410, 429])
    t.equal(
      whyUnanswered(Object.assign(new Error('x'), { statusCode: code }), TIMEOUT),
      undefined,
      `HTTP ${code}: every server would say the same`,
    );
  t.equal(whyUnanswered(new Error('something else'), TIMEOUT), undefined);
});
