// helm lint on the chart, and the renders that must fail: a missing or
// malformed k8sServiceHost (the chart's `fail` messages) and wrong types or
// unknown keys (values.schema.json). Runs the real helm; a missing helm is
// a failure, not a skip.
import t, { type Test } from 'tap';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CHART, EDGE_VALUES, KUBE_VERSION, helm, helmMissingMessage, templateArgs } from './helm.ts';

const HOST = '192.0.2.10';

function renderFails(t: Test, what: string, opts: Parameters<typeof templateArgs>[0], messages: (string | RegExp)[]) {
  t.test(what, async (t) => {
    const r = helm(templateArgs(opts));
    t.not(r.status, 0, 'helm template fails');
    t.equal(r.stdout.trim(), '', 'and renders nothing');
    for (const m of messages) t.match(r.stderr, m, `stderr says ${m}`);
  });
}

t.test('helm is installed (make chart-deps)', async (t) => {
  t.equal(helmMissingMessage(), undefined);
});

t.test('helm lint --strict', async (t) => {
  for (const [what, args] of [
    ['default values', ['--set', `k8sServiceHost=${HOST}`]],
    ['edge values', ['--values', EDGE_VALUES]],
    [
      'hooks, init container and test disabled',
      ['--set', `k8sServiceHost=${HOST},cleanup.enabled=false,test.enabled=false,bpf.autoMount=false,cgroup.autoMount=false`],
    ],
    [
      'SYS_RESOURCE added (kernels < 5.11)',
      ['--set', `k8sServiceHost=${HOST}`, '--set', 'securityContext.capabilities={BPF,NET_ADMIN,PERFMON,SYS_ADMIN,SYS_RESOURCE}'],
    ],
  ] as const) {
    const r = helm(['lint', '--strict', CHART, '--kube-version', KUBE_VERSION, ...args]);
    t.equal(r.status, 0, `${what}: lint passes\n${r.stdout}${r.stderr}`);
    t.match(r.stdout, /1 chart\(s\) linted, 0 chart\(s\) failed/, what);
  }
  // helm lint reports template `fail` calls as [INFO] rather than failing;
  // the message must still reach the operator.
  const r = helm(['lint', CHART, '--kube-version', KUBE_VERSION]);
  t.match(r.stdout + r.stderr, /k8sServiceHost is required/, 'lint without k8sServiceHost shows the message');
});

t.test('the chart refuses to render without a usable API server address', async (t) => {
  renderFails(t, 'k8sServiceHost missing', {}, [
    /k8sServiceHost is required/,
    /cannot reach the API server through the kubernetes Service ClusterIP/,
    /--set k8sServiceHost=/,
  ]);
  renderFails(t, 'k8sServiceHost empty', { set: ['k8sServiceHost='] }, [/k8sServiceHost is required/]);
  renderFails(t, 'k8sServiceHost is a URL', { set: ['k8sServiceHost=https://api.example.test:6443'] }, [
    /k8sServiceHost must be a host name or IP address, not a URL/,
  ]);
  renderFails(t, 'k8sServiceHost carries a port', { set: ['k8sServiceHost=api.example.test:6443'] }, [
    /k8sServiceHost must not carry a port .*put the port in k8sServicePort/,
  ]);
  renderFails(t, 'bracketed IPv6 with a port', { set: ['k8sServiceHost=[fd00::1]:6443'] }, [/k8sServiceHost must not carry a port/]);
  renderFails(t, 'metrics and health on one port', { set: [`k8sServiceHost=${HOST}`, 'metricsPort=9000', 'healthPort=9000'] }, [
    /metricsPort and healthPort must differ/,
  ]);
});

t.test('values.schema.json rejects wrong types with a message naming the value', async (t) => {
  const base = [`k8sServiceHost=${HOST}`];
  const schemaError = /values don't meet the specifications of the schema/;
  renderFails(t, 'metricsPort: "abc"', { set: [...base, 'metricsPort=abc'] }, [schemaError, /\/metricsPort.*got string, want integer/]);
  renderFails(t, 'healthPort out of range', { set: [...base, 'healthPort=70000'] }, [schemaError, /\/healthPort/]);
  renderFails(t, 'metricsBindAddress with a port', { set: [...base, 'metricsBindAddress=127.0.0.1:9000'] }, [
    schemaError,
    /\/metricsBindAddress/,
  ]);
  renderFails(t, 'healthzBindAddress in brackets', { set: [...base, 'healthzBindAddress=[::]'] }, [schemaError, /\/healthzBindAddress/]);
  renderFails(t, 'bindAddress (replaced by metricsBindAddress and healthzBindAddress)', { set: [...base, 'bindAddress=0.0.0.0'] }, [
    schemaError,
    /bindAddress/,
  ]);
  renderFails(t, 'k8sServicePort as a string', { setString: ['k8sServicePort=6443'], set: base }, [
    schemaError,
    /\/k8sServicePort.*got string, want integer/,
  ]);
  renderFails(t, 'logLevel not one of debug/info/warn/error', { set: [...base, 'logLevel=verbose'] }, [
    schemaError,
    /\/logLevel.*value must be one of/,
  ]);
  renderFails(t, 'lbAlgorithm not one svcmap implements', { set: [...base, 'lbAlgorithm=fastest'] }, [
    schemaError,
    /\/lbAlgorithm.*value must be one of/,
  ]);
  renderFails(t, 'lbMode not snat/dsr/hybrid', { set: [...base, 'lbMode=direct'] }, [schemaError, /\/lbMode.*value must be one of/]);
  renderFails(t, 'acceleration not native/best-effort/disabled', { set: [...base, 'acceleration=xdp'] }, [
    schemaError,
    /\/acceleration.*value must be one of/,
  ]);
  renderFails(t, 'nodePort.addresses holding something that is no CIDR', { set: [...base, 'nodePort.addresses={10.0.0.0}'] }, [
    schemaError,
    /\/nodePort\/addresses\/0/,
  ]);
  renderFails(t, 'nodePort.bindProtection not a boolean', { set: [...base, 'nodePort.bindProtection=yes'] }, [
    schemaError,
    /\/nodePort\/bindProtection/,
  ]);
  renderFails(t, 'nodePort.range not first-last', { set: [...base, 'nodePort.range=30000'] }, [schemaError, /\/nodePort\/range/]);
  renderFails(t, 'hostPort.enabled not a boolean', { set: [...base, 'hostPort.enabled=yes'] }, [schemaError, /\/hostPort\/enabled/]);
  renderFails(t, 'staleSockets.podSockets not a boolean', { set: [...base, 'staleSockets.podSockets=yes'] }, [
    schemaError,
    /\/staleSockets\/podSockets/,
  ]);
  renderFails(t, 'an unknown key under staleSockets', { set: [...base, 'staleSockets.udp=true'] }, [schemaError, /staleSockets/]);
  renderFails(t, 'staleSockets.podNamespaces neither netnsDir nor hostPID', { set: [...base, 'staleSockets.podNamespaces=proc'] }, [
    schemaError,
    /\/staleSockets\/podNamespaces.*value must be one of 'netnsDir', 'hostPID'/,
  ]);
  renderFails(t, 'staleSockets.netnsDir not an absolute path', { set: [...base, 'staleSockets.netnsDir=run/netns'] }, [
    schemaError,
    /\/staleSockets\/netnsDir.*does not match pattern '\^\/'/,
  ]);
  renderFails(t, 'a Localhost seccomp profile without its file', { set: [...base, 'securityContext.seccompProfile.type=Localhost'] }, [
    schemaError,
    /\/securityContext\/seccompProfile.*missing property 'localhostProfile'/,
  ]);
  renderFails(t, 'a seccomp profile type Kubernetes does not know', { set: [...base, 'securityContext.seccompProfile.type=Default'] }, [
    schemaError,
    /\/securityContext\/seccompProfile\/type.*value must be one of/,
  ]);
  renderFails(t, 'preflight.enabled not a boolean', { set: base, setString: ['preflight.enabled=yes'] }, [
    schemaError,
    /\/preflight\/enabled/,
  ]);
  renderFails(t, 'an unknown key under preflight', { set: [...base, 'preflight.timeout=5'] }, [schemaError, /preflight/]);
  renderFails(t, 'grafanaDashboard.enabled not a boolean', { set: base, setString: ['grafanaDashboard.enabled=yes'] }, [
    schemaError,
    /\/grafanaDashboard\/enabled/,
  ]);
  renderFails(t, 'an unknown key under grafanaDashboard', { set: [...base, 'grafanaDashboard.folder=x'] }, [
    schemaError,
    /grafanaDashboard/,
  ]);
  renderFails(t, 'devices as a string instead of a list', { set: [...base, 'devices=eth0'] }, [
    schemaError,
    /\/devices.*got string, want array/,
  ]);
  renderFails(t, 'a misspelt top-level key', { set: [...base, 'metricPort=1'] }, [
    schemaError,
    /additional properties 'metricPort' not allowed/,
  ]);
  renderFails(t, 'pinDir outside /sys/fs/bpf', { set: [...base, 'pinDir=/tmp/pins'] }, [schemaError, /\/pinDir/]);
  renderFails(t, 'resources as a string', { set: [...base, 'resources=big'] }, [schemaError, /\/resources/]);
  renderFails(t, 'bpf.compile as a string', { set: base, setString: ['bpf.compile=yes'] }, [
    schemaError,
    /\/bpf\/compile.*got string, want boolean/,
  ]);
});

t.test('values.schema.json accepts only capability names as Kubernetes takes them', async (t) => {
  const base = [`k8sServiceHost=${HOST}`];
  const schemaError = /values don't meet the specifications of the schema/;
  // The enum message lists the valid names, which shows the expected form.
  const validNames = /value must be one of .*'BPF'.*'SYS_RESOURCE'/;
  const caps = (list: string) => ({ set: [...base, `securityContext.capabilities={${list}}`] });
  renderFails(t, 'a CAP_ prefix', caps('BPF,NET_ADMIN,PERFMON,SYS_ADMIN,CAP_SYS_RESOURCE'), [
    schemaError,
    /\/securityContext\/capabilities\/4.*value must be one of/,
    validNames,
  ]);
  renderFails(t, 'lower case', caps('bpf,NET_ADMIN'), [schemaError, /\/securityContext\/capabilities\/0.*value must be one of/]);
  renderFails(t, 'a misspelt name', caps('BPF,NET_ADMN'), [schemaError, /\/securityContext\/capabilities\/1.*value must be one of/]);
  renderFails(t, 'ALL (add only named capabilities)', caps('ALL'), [
    schemaError,
    /\/securityContext\/capabilities\/0.*value must be one of/,
  ]);
  renderFails(t, 'a name twice', caps('BPF,BPF'), [schemaError, /\/securityContext\/capabilities.*items at 0 and 1 are equal/]);
  renderFails(t, 'a string instead of a list', { set: [...base, 'securityContext.capabilities=SYS_RESOURCE'] }, [
    schemaError,
    /\/securityContext\/capabilities.*got string, want array/,
  ]);
  // --set cannot express an empty list; a values file can.
  const dir = mkdtempSync(join(tmpdir(), 'svcmap-chart-caps-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const empty = join(dir, 'empty-caps.yaml');
  writeFileSync(empty, 'securityContext:\n  capabilities: []\n');
  renderFails(t, 'an empty list', { set: base, valuesFiles: [empty] }, [
    schemaError,
    /\/securityContext\/capabilities.*minItems: got 0, want 1/,
  ]);
});
