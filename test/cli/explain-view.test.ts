// svcmap explain's logic against fake map readers: every branch the
// datapath takes for a new connection (bpf/lib/lb.h, sock_lb.h, tc_lb.h),
// and the text the command prints for it.
import { endianness } from 'node:os';
import t from 'tap';
import type { AffinityKey, AffinityValue, BackendValue, SvcKey, SvcValue } from '../../src/maps/codecs.ts';
import {
  AFFINITY_ORIGIN_SOCK,
  AFFINITY_ORIGIN_SOCK6,
  AFFINITY_ORIGIN_TC,
  AFFINITY_ORIGIN_TC6,
  BACKEND_F_LOCAL,
  BACKEND_STATE_ACTIVE,
  BACKEND_STATE_TERMINATING,
  IPPROTO_TCP,
  IPPROTO_UDP,
  LB_ALG_LC,
  LB_ALG_RANDOM,
  SVC_F_AFFINITY,
  SVC_F_CLUSTERIP,
  SVC_F_DSR,
  SVC_F_ETP_LOCAL,
  SVC_F_NODEPORT,
  SVC_F_SRC_RANGES,
  SVC_F_TWO_SCOPES,
  SVC_F_WILDCARD,
  SVC_SCOPE_EXT,
  SVC_SCOPE_INT,
} from '../../src/maps/constants.ts';
import { type ExplainReaders, NO_ENDPOINTS, UNTOUCHED, explain, renderExplanation } from '../../src/cli/explain-view.ts';
import { bootTimeNs } from '../../src/cli/explain.ts';
import { zoneNames } from '../../src/cli/dump-view.ts';
import { cells, checkTableStyles } from './table-styles.ts';

const SEC = 1_000_000_000n;
const NOW = 5000n * SEC;

interface FrontendSpec {
  addr: string;
  port: number;
  proto?: number;
  scope?: number;
  flags: number;
  revNat: number;
  /** Backend ids in slot order. */
  slots: number[];
  timeout?: number;
  algorithm?: number;
}

/** In-memory maps with the datapath's keys, and readers over them. */
class FakeMaps {
  services = new Map<string, SvcValue>();
  backends = new Map<number, BackendValue>();
  affinity: Array<[AffinityKey, AffinityValue]> | undefined = [];
  allowed: Set<string> | undefined = undefined;

  static key(k: SvcKey): string {
    return `${k.addr}:${k.port}/${k.proto}/${k.scope}/${k.slot}`;
  }

  backend(id: number, addr: string, opts: { state?: number; flags?: number; port?: number } = {}): this {
    this.backends.set(id, {
      addr,
      port: opts.port ?? 8080,
      proto: IPPROTO_TCP,
      state: opts.state ?? BACKEND_STATE_ACTIVE,
      flags: opts.flags ?? 0,
      zone: 0,
    });
    return this;
  }

  frontend(f: FrontendSpec): this {
    const base = { addr: f.addr, port: f.port, proto: f.proto ?? IPPROTO_TCP, scope: f.scope ?? SVC_SCOPE_EXT };
    this.services.set(FakeMaps.key({ ...base, slot: 0 }), {
      backend_id: 0,
      rev_nat_id: f.revNat,
      count: f.slots.length,
      flags: f.flags,
      algorithm: f.algorithm ?? LB_ALG_RANDOM,
      affinity_timeout: f.timeout ?? 0,
    });
    f.slots.forEach((id, i) =>
      this.services.set(FakeMaps.key({ ...base, slot: i + 1 }), {
        backend_id: id,
        rev_nat_id: 0,
        count: 0,
        flags: 0,
        algorithm: 0,
        affinity_timeout: 0,
      }),
    );
    return this;
  }

  tcEntry(client: string, revNat: number, v: AffinityValue): this {
    this.affinity!.push([{ netns_cookie: 0n, client_addr: client, rev_nat_id: revNat, origin: AFFINITY_ORIGIN_TC }, v]);
    return this;
  }

  sockEntry(cookie: bigint, revNat: number, v: AffinityValue): this {
    this.affinity!.push([{ netns_cookie: cookie, client_addr: '0.0.0.0', rev_nat_id: revNat, origin: AFFINITY_ORIGIN_SOCK }, v]);
    return this;
  }

  readers(): ExplainReaders {
    const aff = this.affinity;
    const same = (a: AffinityKey, b: AffinityKey) =>
      a.netns_cookie === b.netns_cookie && a.client_addr === b.client_addr && a.rev_nat_id === b.rev_nat_id && a.origin === b.origin;
    return {
      service: (k) => this.services.get(FakeMaps.key(k)),
      backend: (id) => this.backends.get(id),
      affinity: aff ? { get: (k) => aff.find(([x]) => same(x, k))?.[1], entries: () => aff } : undefined,
      sourceAllowed: this.allowed ? (id, addr) => this.allowed!.has(`${id}/${addr}`) : undefined,
      nowNs: NOW,
    };
  }
}

const three = () =>
  new FakeMaps()
    .backend(1, '10.244.0.11')
    .backend(2, '10.244.0.12', { state: BACKEND_STATE_TERMINATING })
    .backend(3, '10.244.0.13', { flags: BACKEND_F_LOCAL });
const tcp = (addr: string, port: number, from?: string) => ({ addr, port, proto: IPPROTO_TCP, ...(from ? { from } : {}) });

t.test('an address that is no frontend passes untouched', async (t) => {
  const m = three().frontend({ addr: '10.96.0.10', port: 80, flags: SVC_F_CLUSTERIP, revNat: 1, slots: [1, 2, 3] });
  for (const q of [
    tcp('10.96.0.99', 80),
    tcp('10.96.0.10', 81),
    { ...tcp('10.96.0.10', 80), proto: IPPROTO_UDP },
    tcp('10.96.0.99', 80, '192.0.2.1'),
  ]) {
    const e = explain(q, m.readers());
    t.equal(e.frontend, null, `${e.query}: no frontend`);
    t.same(e.verdict, { kind: 'untouched', text: UNTOUCHED });
  }
  t.equal(
    renderExplanation(explain(tcp('10.96.0.99', 80), m.readers())),
    'Frontend:   10.96.0.99:80/TCP\nPath:       socket hooks (a connection made on this node)\nVerdict:    not a service frontend: traffic passes untouched\n',
  );
});

t.test('a plain service: its flags, scope, backends in slot order, random among them', async (t) => {
  const m = three().frontend({ addr: '10.96.0.10', port: 80, flags: SVC_F_CLUSTERIP, revNat: 7, slots: [3, 1, 2] });
  const e = explain(tcp('10.96.0.10', 80), m.readers());
  t.same(e.frontend, {
    frontend: '10.96.0.10:80/TCP',
    flags: ['ClusterIP'],
    scope: 'external',
    revNatId: 7,
    algorithm: 'random (uniform)',
    affinityTimeoutSeconds: null,
    backends: [
      { slot: 1, id: 3, address: '10.244.0.13:8080', state: 'active', local: true },
      { slot: 2, id: 1, address: '10.244.0.11:8080', state: 'active', local: false },
      { slot: 3, id: 2, address: '10.244.0.12:8080', state: 'terminating', local: false },
    ],
    problems: [],
  });
  t.same(e.verdict, { kind: 'random', among: 3, text: 'random among 3' });
  t.same(e.remembered, []);
  const text = renderExplanation(e);
  t.match(text, /^Flags:      ClusterIP$/m);
  t.match(text, /^Algorithm:  random \(uniform\)$/m);
  t.match(text, /^Affinity:   none$/m);
  t.match(text, /^ {2}SLOT {2}ID {2}BACKEND {11}STATE {8}LOCAL$/m);
  t.match(text, /^ {2}3 {5}2 {3}10\.244\.0\.12:8080 {2}terminating {2}no$/m);
  t.match(text, /^Verdict:    random among 3\n$/m);
  t.equal(explain(tcp('10.96.0.10', 80, '192.0.2.1'), m.readers()).verdict.text, 'random among 3', 'the same from outside');
});

t.test('no endpoints: refused at connect, dropped at tc', async (t) => {
  const m = three().frontend({ addr: '10.96.0.20', port: 80, flags: SVC_F_CLUSTERIP | SVC_F_AFFINITY, revNat: 2, slots: [], timeout: 60 });
  for (const from of [undefined, '192.0.2.1']) {
    const e = explain(tcp('10.96.0.20', 80, from), m.readers());
    t.same(e.verdict, { kind: 'refused', text: NO_ENDPOINTS });
    t.same(e.frontend?.backends, []);
  }
  t.equal(NO_ENDPOINTS, 'refused: no endpoints (ECONNREFUSED at connect / dropped at tc)');
});

t.test('127.0.0.1:NodePort: the wildcard entry, on the socket path only', async (t) => {
  const m = three()
    .frontend({ addr: '0.0.0.0', port: 30080, flags: SVC_F_NODEPORT | SVC_F_WILDCARD, revNat: 3, slots: [1] })
    .frontend({ addr: '0.0.0.0', port: 30081, flags: SVC_F_NODEPORT, revNat: 4, slots: [1] });
  const e = explain(tcp('127.0.0.1', 30080), m.readers());
  t.equal(e.frontend?.frontend, '0.0.0.0:30080/TCP');
  t.match(e.frontend?.matched, /wildcard NodePort entry/);
  t.equal(e.verdict.text, 'random among 1');
  t.match(renderExplanation(e), /^Frontend: {3}0\.0\.0\.0:30080\/TCP \(127\.0\.0\.1:30080\/TCP: the wildcard NodePort entry/m);
  t.equal(
    explain(tcp('127.0.0.1', 30081), m.readers()).verdict.kind,
    'untouched',
    'an entry at 0.0.0.0 without the wildcard flag is not used',
  );
  t.equal(explain(tcp('127.0.0.1', 30080, '192.0.2.1'), m.readers()).verdict.kind, 'untouched', 'tc looks up the address only');
  t.equal(explain(tcp('10.0.0.5', 30080), m.readers()).verdict.kind, 'untouched', 'only a loopback address falls back');
});

t.test('externalTrafficPolicy Local: this node uses the internal twin, outside traffic the external entry', async (t) => {
  const flags = SVC_F_NODEPORT | SVC_F_ETP_LOCAL | SVC_F_TWO_SCOPES;
  const m = three()
    .frontend({ addr: '10.0.0.5', port: 30080, flags, revNat: 5, slots: [3] })
    .frontend({ addr: '10.0.0.5', port: 30080, scope: SVC_SCOPE_INT, flags, revNat: 6, slots: [1, 2, 3] });
  const inNode = explain(tcp('10.0.0.5', 30080), m.readers());
  t.equal(inNode.frontend?.scope, 'internal');
  t.match(inNode.frontend?.scopeReason, /internal twin, which holds every endpoint/);
  t.equal(inNode.frontend?.revNatId, 6);
  t.same(
    inNode.frontend?.backends.map((b) => b.id),
    [1, 2, 3],
  );
  t.same(inNode.frontend?.flags, ['NodePort', 'ETP=Local', 'two-scopes']);
  const outside = explain(tcp('10.0.0.5', 30080, '192.0.2.1'), m.readers());
  t.equal(outside.frontend?.scope, 'external');
  t.match(outside.frontend?.scopeReason, /only this node's endpoints/);
  t.same(
    outside.frontend?.backends.map((b) => b.id),
    [3],
  );
  t.equal(outside.verdict.text, 'random among 1');

  const noTwin = three().frontend({ addr: '10.0.0.5', port: 30080, flags, revNat: 5, slots: [3] });
  const e = explain(tcp('10.0.0.5', 30080), noTwin.readers());
  t.equal(e.frontend?.scope, 'external');
  t.match(e.frontend?.scopeReason, /internal twin is missing/);
});

t.test("tc with affinity: the client's current entry decides; a stale or missing one means a new random choice", async (t) => {
  const vip = { addr: '10.96.0.30', port: 80, flags: SVC_F_CLUSTERIP | SVC_F_AFFINITY, revNat: 9, slots: [1, 2, 3], timeout: 100 };
  const entry = (slot: number, backendId: number, ago: bigint): AffinityValue => ({ last_used: NOW - ago, backend_id: backendId, slot });
  const m = three()
    .frontend(vip)
    .tcEntry('192.0.2.1', 9, entry(2, 2, 99n * SEC)) // current, one second before expiry
    .tcEntry('192.0.2.2', 9, entry(2, 2, 101n * SEC)) // expired
    .tcEntry('192.0.2.3', 9, entry(2, 1, 3n * SEC)) // slot 2 now holds backend 2
    .tcEntry('192.0.2.4', 9, entry(4, 1, 3n * SEC)) // past the count
    .tcEntry('192.0.2.5', 9, { last_used: NOW + SEC, backend_id: 3, slot: 3 }) // refreshed by another CPU "after" now
    .tcEntry('192.0.2.6', 8, entry(1, 1, SEC)); // another frontend's

  let e = explain(tcp('10.96.0.30', 80, '192.0.2.1'), m.readers());
  t.equal(e.verdict.kind, 'affinity');
  t.same(
    e.verdict.backend,
    { slot: 2, id: 2, address: '10.244.0.12:8080', state: 'terminating', local: false },
    "the entry is used, whatever the backend's state",
  );
  t.equal(e.verdict.text, '10.244.0.12:8080 (slot 2): the affinity entry of 192.0.2.1, last used 99s ago');
  t.match(e.clientAffinity, { client: '192.0.2.1', origin: 'tc', current: true, lastUsedSecondsAgo: 99 });
  t.equal(e.frontend?.affinityTimeoutSeconds, 100);
  t.match(renderExplanation(e), /^Affinity: {3}ClientIP, timeout 100s$/m);

  const stale: Array<[string, RegExp]> = [
    ['192.0.2.2', /expired: unused for more than the 100s timeout/],
    ['192.0.2.3', /slot 2 no longer holds backend 1/],
    ['192.0.2.4', /its slot 4 is past the frontend's 3 slots/],
  ];
  for (const [client, why] of stale) {
    e = explain(tcp('10.96.0.30', 80, client), m.readers());
    t.equal(e.verdict.kind, 'random', client);
    t.equal(e.clientAffinity?.current, false);
    t.match(e.clientAffinity?.stale, why);
    t.match(
      e.verdict.text,
      new RegExp(
        `^random among 3: the affinity entry of ${client.replace(/\./g, '\\.')} is stale \\(${why.source}\\); the choice is remembered for 100s$`,
      ),
    );
  }
  e = explain(tcp('10.96.0.30', 80, '192.0.2.5'), m.readers());
  t.equal(e.verdict.kind, 'affinity', 'an entry stamped after "now" is fresh, as in the datapath');
  t.equal(e.clientAffinity?.lastUsedSecondsAgo, 0);

  e = explain(tcp('10.96.0.30', 80, '192.0.2.6'), m.readers());
  t.equal(e.clientAffinity, null, "another frontend's entry is not this client's");
  t.equal(e.verdict.text, 'random among 3: 192.0.2.6 has no affinity entry; the choice is remembered for 100s');
  t.same(
    e.remembered.map((a) => a.client),
    ['192.0.2.5', '192.0.2.3', '192.0.2.4', '192.0.2.1', '192.0.2.2'],
    "the frontend's entries, most recently used first",
  );

  m.backends.delete(2);
  e = explain(tcp('10.96.0.30', 80, '192.0.2.1'), m.readers());
  t.equal(e.verdict.kind, 'random');
  t.match(e.clientAffinity?.stale, /backend 2 is gone/);
  t.match(e.clientAffinity?.backend, 'backend 2 (gone)');
  t.same(e.frontend?.problems, ['slot 2 refers to missing backend 2']);
});

t.test('socket path with affinity: every remembered pod is listed; the choice for an unknown one is random', async (t) => {
  const m = three()
    .frontend({
      addr: '10.96.0.40',
      port: 53,
      proto: IPPROTO_UDP,
      flags: SVC_F_CLUSTERIP | SVC_F_AFFINITY,
      revNat: 11,
      slots: [1, 2],
      timeout: 10800,
    })
    .sockEntry(4097n, 11, { last_used: NOW - 2n * SEC, backend_id: 2, slot: 2 })
    .sockEntry(8193n, 11, { last_used: NOW - 20_000n * SEC, backend_id: 1, slot: 1 })
    .tcEntry('192.0.2.9', 11, { last_used: NOW - SEC / 2n, backend_id: 1, slot: 1 })
    .sockEntry(4097n, 12, { last_used: NOW, backend_id: 1, slot: 1 });
  const e = explain({ addr: '10.96.0.40', port: 53, proto: IPPROTO_UDP }, m.readers());
  t.equal(e.query, '10.96.0.40:53/UDP');
  t.same(e.remembered, [
    { client: '192.0.2.9', origin: 'tc', backendId: 1, backend: '10.244.0.11:8080', slot: 1, lastUsedSecondsAgo: 0.5, current: true },
    { client: 'netns 4097', origin: 'socket', backendId: 2, backend: '10.244.0.12:8080', slot: 2, lastUsedSecondsAgo: 2, current: true },
    {
      client: 'netns 8193',
      origin: 'socket',
      backendId: 1,
      backend: '10.244.0.11:8080',
      slot: 1,
      lastUsedSecondsAgo: 20000,
      current: false,
      stale: 'expired: unused for more than the 10800s timeout',
    },
  ]);
  t.same(e.verdict, {
    kind: 'random',
    among: 2,
    text: 'random among 2, unless the connecting pod has a current affinity entry (1 has one, see Remembered); the choice is remembered for 10800s',
  });
  t.equal(e.clientAffinity, undefined, 'no client is named');
  const text = renderExplanation(e);
  t.match(text, /^Remembered: 3 clients$/m);
  t.match(text, /^ {2}socket netns 4097 {2}10\.244\.0\.12:8080 {2}2 {5}2s ago {6}yes$/m);
  t.match(text, /^ {2}socket netns 8193 {2}10\.244\.0\.11:8080 {2}1 {5}20000s ago {2}no: expired/m);

  m.affinity = undefined;
  t.same(
    explain({ addr: '10.96.0.40', port: 53, proto: IPPROTO_UDP }, m.readers()).remembered,
    [],
    'no affinity map pinned: nothing remembered',
  );
});

t.test('loadBalancerSourceRanges: a client outside them is dropped at tc; the socket path does not look', async (t) => {
  const m = three().frontend({ addr: '192.0.2.100', port: 443, flags: SVC_F_CLUSTERIP | SVC_F_SRC_RANGES, revNat: 13, slots: [1] });
  m.allowed = new Set(['13/198.51.100.7']);
  t.same(explain(tcp('192.0.2.100', 443, '203.0.113.1'), m.readers()).verdict, {
    kind: 'dropped',
    text: "dropped at tc: 203.0.113.1 is not in the frontend's loadBalancerSourceRanges",
  });
  t.equal(explain(tcp('192.0.2.100', 443, '198.51.100.7'), m.readers()).verdict.kind, 'random');
  t.equal(explain(tcp('192.0.2.100', 443), m.readers()).verdict.kind, 'random');
  m.allowed = new Set();
  m.frontend({ addr: '192.0.2.100', port: 443, flags: SVC_F_CLUSTERIP | SVC_F_SRC_RANGES, revNat: 13, slots: [] });
  t.equal(
    explain(tcp('192.0.2.100', 443, '203.0.113.1'), m.readers()).verdict.kind,
    'dropped',
    'the range is checked before the count, as lb4_tc_new_flow does',
  );
});

t.test('problems a reader would meet, and an algorithm this svcmap does not know', async (t) => {
  const m = three().frontend({ addr: '10.96.0.50', port: 80, flags: SVC_F_CLUSTERIP, revNat: 14, slots: [1, 9, 3], algorithm: 200 });
  m.services.delete(FakeMaps.key({ addr: '10.96.0.50', port: 80, proto: IPPROTO_TCP, scope: SVC_SCOPE_EXT, slot: 3 }));
  const e = explain(tcp('10.96.0.50', 80), m.readers());
  t.same(e.frontend?.problems, ['slot 2 refers to missing backend 9', 'slot 3 missing']);
  t.same(
    e.frontend?.backends.map((b) => b.slot),
    [1],
  );
  t.equal(e.frontend?.algorithm, 'algorithm 200 (unknown to this svcmap)');
  t.match(renderExplanation(e), /^Problems: {3}slot 2 refers to missing backend 9; slot 3 missing$/m);
});

t.test('the boot time clock from /proc/uptime', async (t) => {
  t.equal(bootTimeNs('12345.67 2345.01\n'), 12_345_670_000_000n);
  t.equal(bootTimeNs('0.05 0.00\n'), 50_000_000n);
  t.throws(() => bootTimeNs('garbage'), /cannot read the boot time clock/);
  const now = bootTimeNs();
  t.ok(now > 0n, "this machine's clock reads");
  t.ok(bootTimeNs() >= now, 'and does not go back');
});

t.test('lc: the algorithm by name, each backend with its live connections (a negative count as 0)', async (t) => {
  const m = three().frontend({ addr: '10.96.0.60', port: 80, flags: SVC_F_CLUSTERIP, revNat: 15, slots: [1, 2, 3], algorithm: LB_ALG_LC });
  const conns = new Map([
    [1, { sock: 2n, tc: 1n }],
    [3, { sock: -1n, tc: 0n }],
  ]);
  const e = explain(tcp('10.96.0.60', 80), { ...m.readers(), connections: (id) => conns.get(id) });
  t.equal(e.frontend?.algorithm, 'lc (least connections)');
  t.same(
    e.frontend?.backends.map((b) => b.connections),
    [3, 0, 0],
    'sock + tc; none counted; -1 read as 0',
  );
  t.match(e.verdict, { kind: 'random', text: 'least connections among 3' });
  const text = renderExplanation(e);
  t.match(text, /SLOT +ID +BACKEND +STATE +LOCAL +CONNS/);
  t.match(text, /1 +1 +10\.244\.0\.11:8080 +active +no +3$/m);
  t.notOk(/CONNS/.test(renderExplanation(explain(tcp('10.96.0.60', 80), m.readers()))), 'no count map: no column');
});

t.test("an IPv6 frontend: bracketed names, [::1]:NodePort finds [::], only its family's affinity entries", async (t) => {
  // The readers are the IPv6 maps' (explain.ts picks them by the VIP's family); the affinity map is shared.
  const m = new FakeMaps()
    .backend(1, 'fd00:10:244::11')
    .backend(2, 'fd00:10:244::12')
    .frontend({ addr: 'fd00:10:96::a', port: 80, flags: SVC_F_CLUSTERIP | SVC_F_AFFINITY, revNat: 5, slots: [1, 2], timeout: 60 })
    .frontend({ addr: '::', port: 30080, flags: SVC_F_NODEPORT | SVC_F_WILDCARD, revNat: 6, slots: [2] })
    .sockEntry(42n, 5, { last_used: NOW - SEC, backend_id: 1, slot: 1 }); // an IPv4 frontend's, whose id is 5 too
  m.affinity!.push([
    { netns_cookie: 43n, client_addr: '0.0.0.0', rev_nat_id: 5, origin: AFFINITY_ORIGIN_SOCK6 },
    { last_used: NOW - 2n * SEC, backend_id: 2, slot: 2 },
  ]);
  const e = explain(tcp('fd00:10:96::a', 80), m.readers());
  t.equal(e.query, '[fd00:10:96::a]:80/TCP');
  t.equal(e.frontend?.frontend, '[fd00:10:96::a]:80/TCP');
  t.same(
    e.frontend?.backends.map((b) => b.address),
    ['[fd00:10:244::11]:8080', '[fd00:10:244::12]:8080'],
  );
  t.same(
    e.remembered.map((r) => [r.client, r.backend, r.current]),
    [['netns 43', '[fd00:10:244::12]:8080', true]],
    'the IPv6 socket entry only',
  );
  const lo = explain(tcp('::1', 30080), m.readers());
  t.equal(lo.frontend?.frontend, '[::]:30080/TCP');
  t.match(lo.frontend?.matched, /wildcard NodePort entry/);
  const mapped = explain(
    { ...tcp('10.96.0.10', 80), mapped: true },
    three()
      .frontend({ addr: '10.96.0.10', port: 80, flags: SVC_F_CLUSTERIP, revNat: 1, slots: [1] })
      .readers(),
  );
  t.equal(mapped.query, '[::ffff:10.96.0.10]:80/TCP');
  t.match(mapped.frontend, { frontend: '10.96.0.10:80/TCP', matched: /IPv4-mapped/ });
});

t.test(
  "tc for an IPv6 frontend and client: ETP Local's external entry, the IPv6 source ranges, the client's tc6 entry by /64 and folded interface id",
  async (t) => {
    // The readers are the IPv6 maps' (explain.ts picks them by the VIP's family); the affinity map is shared.
    const flags = SVC_F_NODEPORT | SVC_F_ETP_LOCAL | SVC_F_TWO_SCOPES | SVC_F_AFFINITY | SVC_F_SRC_RANGES;
    const m = new FakeMaps()
      .backend(1, 'fd00:10:244::11')
      .backend(2, 'fd00:10:244::12', { flags: BACKEND_F_LOCAL })
      .backend(3, 'fd00:10:244::13', { flags: BACKEND_F_LOCAL })
      .frontend({ addr: 'fd00:10::5', port: 30080, flags, revNat: 7, slots: [2, 3], timeout: 60 })
      .frontend({ addr: 'fd00:10::5', port: 30080, scope: SVC_SCOPE_INT, flags, revNat: 8, slots: [1, 2, 3], timeout: 60 });
    m.allowed = new Set(['7/fd00:1:2:3:4:5:6:7', '7/fd00:1:2:3:6:7:4:5', '7/fd00:1:2:3::9']);
    // What lb6_tc_select() writes for fd00:1:2:3:4:5:6:7: its first 8 bytes as they lie in netns_cookie
    // (read in host order), words 2 and 3 XORed in client_addr (0004:0005 ^ 0006:0007).
    const prefix = Buffer.from([0xfd, 0x00, 0x00, 0x01, 0x00, 0x02, 0x00, 0x03]);
    const cookie = endianness() === 'LE' ? prefix.readBigUInt64LE(0) : prefix.readBigUInt64BE(0);
    const tc6 = (revNat: number): AffinityKey => ({
      netns_cookie: cookie,
      client_addr: '0.2.0.2',
      rev_nat_id: revNat,
      origin: AFFINITY_ORIGIN_TC6,
    });
    m.affinity!.push(
      [tc6(7), { last_used: NOW - 3n * SEC, backend_id: 3, slot: 2 }],
      [tc6(8), { last_used: NOW - SEC, backend_id: 1, slot: 1 }], // the internal twin's id: not the entry tc reads
      [
        { netns_cookie: 0n, client_addr: '0.2.0.2', rev_nat_id: 7, origin: AFFINITY_ORIGIN_TC },
        { last_used: NOW, backend_id: 2, slot: 1 },
      ], // an IPv4 frontend's, id 7 too
    );

    const e = explain(tcp('fd00:10::5', 30080, 'fd00:1:2:3:4:5:6:7'), m.readers());
    t.equal(e.path, 'tc');
    t.equal(e.query, '[fd00:10::5]:30080/TCP');
    t.match(e.frontend, { scope: 'external', scopeReason: /only this node's endpoints/, revNatId: 7 });
    t.same(
      e.frontend?.backends.map((b) => b.address),
      ['[fd00:10:244::12]:8080', '[fd00:10:244::13]:8080'],
      'the external entry: the local endpoints',
    );
    t.match(e.clientAffinity, { client: 'fd00:1:2:3::/64 fold 00020002', origin: 'tc', backendId: 3, slot: 2, current: true });
    t.same(e.verdict, {
      kind: 'affinity',
      backend: { slot: 2, id: 3, address: '[fd00:10:244::13]:8080', state: 'active', local: true },
      text: '[fd00:10:244::13]:8080 (slot 2): the affinity entry of fd00:1:2:3:4:5:6:7, last used 3s ago',
    });
    t.same(
      e.remembered.map((r) => [r.origin, r.client, r.backend]),
      [['tc', 'fd00:1:2:3::/64 fold 00020002', '[fd00:10:244::13]:8080']],
      "the frontend's IPv6 tc entry only (not the twin's, not the IPv4 frontend's of the same id)",
    );
    t.match(renderExplanation(e), /^Path: {7}tc \(a packet from fd00:1:2:3:4:5:6:7, outside the node\)$/m);
    t.notMatch(renderExplanation(e), /^Hook:/m, 'no Hook line when the devices were not read');
    const hooks = renderExplanation({
      ...e,
      devices: [
        { device: 'br0', runs: 'xdp generic' },
        { device: 'eth0', runs: 'xdp native' },
        { device: 'eth1', runs: 'tc only' },
      ],
    });
    t.match(
      hooks,
      /^Path: .*\nHook: {7}br0: XDP in generic mode \(what XDP passes on: tc ingress\); eth0: XDP in native mode \(what XDP passes on: tc ingress\); eth1: tc ingress$/m,
      'which hook meets the packet on each device',
    );
    t.match(renderExplanation({ ...e, devices: [] }), /^Hook: {7}none: no external device has svcmap_tc_in/m);
    t.match(renderExplanation(e), /^ {2}tc fd00:1:2:3::\/64 fold 00020002 {2}\[fd00:10:244::13\]:8080 {2}2 +3s ago +yes$/m);

    t.equal(
      explain(tcp('fd00:10::5', 30080, 'fd00:1:2:3:6:7:4:5'), m.readers()).verdict.kind,
      'affinity',
      'a client of the same /64 whose fold is equal shares the entry',
    );
    t.equal(
      explain(tcp('fd00:10::5', 30080, 'fd00:1:2:3::9'), m.readers()).verdict.text,
      'random among 2: fd00:1:2:3::9 has no affinity entry; the choice is remembered for 60s',
    );
    t.same(explain(tcp('fd00:10::5', 30080, 'fd00:9::1'), m.readers()).verdict, {
      kind: 'dropped',
      text: "dropped at tc: fd00:9::1 is not in the frontend's loadBalancerSourceRanges",
    });
    const inNode = explain(tcp('fd00:10::5', 30080), m.readers());
    t.match(inNode.frontend, { scope: 'internal', revNatId: 8 });
    t.same(
      inNode.remembered.map((r) => r.client),
      ['fd00:1:2:3::/64 fold 00020002'],
      "the socket path lists the twin's entries",
    );
  },
);

t.test(
  "-o wide adds the backends' zones and the backend id each client keeps; --no-headers drops the tables' header lines; the rest is the same",
  async (t) => {
    const m = three()
      .frontend({
        addr: '10.96.0.40',
        port: 53,
        proto: IPPROTO_UDP,
        flags: SVC_F_CLUSTERIP | SVC_F_AFFINITY,
        revNat: 11,
        slots: [1, 2, 3],
        timeout: 10800,
      })
      .sockEntry(4097n, 11, { last_used: NOW - 2n * SEC, backend_id: 2, slot: 2 })
      .sockEntry(8193n, 11, { last_used: NOW - 20_000n * SEC, backend_id: 1, slot: 1 });
    m.backends.set(1, { ...m.backends.get(1)!, zone: 1 });
    const conns = new Map([[1, { sock: 2n, tc: 1n }]]);
    const e = explain(
      { addr: '10.96.0.40', port: 53, proto: IPPROTO_UDP },
      { ...m.readers(), connections: (id) => conns.get(id), zoneOf: zoneNames([[1, { name: 'zone-a' }]]) },
    );
    t.same(
      e.frontend?.backends.map((b) => b.zone),
      ['zone-a', undefined, undefined],
      'zones by name, as dump shows them',
    );
    const text = (wide: boolean, headers: boolean) => renderExplanation(e, { wide, headers }).trimEnd().split('\n');
    // The tables: runs of indented lines; the rest: the "Field: value" lines.
    const tables = (lines: string[]) =>
      lines.reduce<string[][]>((acc, l, i) => {
        if (l.startsWith('  ')) (lines[i - 1]?.startsWith('  ') ? acc.at(-1)! : (acc.push([]), acc.at(-1)!)).push(l);
        return acc;
      }, []);
    const facts = (lines: string[]) => lines.filter((l) => !l.startsWith('  '));
    const [plain, wide, bare] = [text(false, true), text(true, true), text(false, false)];
    t.same(facts(wide), facts(plain), 'wide: the same facts');
    t.same(facts(bare), facts(plain), '--no-headers: the same facts');
    t.equal(tables(plain).length, 2);
    checkTableStyles(t, { plain: tables(plain)[0]!, wide: tables(wide)[0]!, bare: tables(bare)[0]! }, ['ZONE'], 'backends');
    checkTableStyles(t, { plain: tables(plain)[1]!, wide: tables(wide)[1]!, bare: tables(bare)[1]! }, ['BACKEND ID'], 'remembered');
    t.same(tables(wide)[0]!.map(cells).slice(0, 2), [
      ['SLOT', 'ID', 'BACKEND', 'STATE', 'LOCAL', 'CONNS', 'ZONE'],
      ['1', '1', '10.244.0.11:8080', 'active', 'no', '3', 'zone-a'],
    ]);
    t.same(cells(tables(wide)[1]![1]!), ['socket netns 4097', '10.244.0.12:8080', '2', '2', '2s ago', 'yes']);
  },
);

t.test(
  "the Mode line: how a flow from outside reaches a backend on another node (the master entry's dsr flag), tc path only",
  async (t) => {
    const m = three()
      .frontend({ addr: '192.0.2.10', port: 30080, flags: SVC_F_NODEPORT | SVC_F_DSR, revNat: 1, slots: [1, 3] })
      .frontend({ addr: '192.0.2.10', port: 30080, proto: IPPROTO_UDP, flags: SVC_F_NODEPORT, revNat: 2, slots: [1, 3] })
      .frontend({ addr: '192.0.2.10', port: 30081, flags: SVC_F_NODEPORT | SVC_F_DSR | SVC_F_ETP_LOCAL, revNat: 3, slots: [3] });
    const devices = [{ device: 'eth0', runs: 'tc only' }];
    const dsr = explain(tcp('192.0.2.10', 30080, '198.51.100.7'), m.readers());
    t.match(dsr.mode, { mode: 'dsr' });
    t.match(
      renderExplanation({ ...dsr, devices }),
      /^Hook: {7}eth0: tc ingress\nMode: {7}dsr \(a backend on another node sees the client's address; its node answers the client directly, from the frontend's address\)\nFlags: {6}NodePort, dsr$/m,
      'next to the Hook line',
    );
    // hybrid: the UDP entry of the same Service has no dsr flag.
    const udp = explain({ addr: '192.0.2.10', port: 30080, proto: IPPROTO_UDP, from: '198.51.100.7' }, m.readers());
    t.match(udp.mode, { mode: 'snat' });
    t.match(
      renderExplanation(udp),
      /^Mode: {7}snat \(a backend on another node sees this node's address; its replies return through this node\)$/m,
    );
    t.match(
      renderExplanation(explain(tcp('192.0.2.10', 30081, '198.51.100.7'), m.readers())),
      /^Mode: {7}dsr \(.*\); externalTrafficPolicy Local: only this node's backends, DNAT only$/m,
    );
    const socket = explain(tcp('192.0.2.10', 30080), m.readers());
    t.equal(socket.mode, undefined, 'the socket path: no mode (connect() is translated, no packet is forwarded)');
    t.notMatch(renderExplanation(socket), /^Mode:/m);
    t.notMatch(renderExplanation(explain(tcp('192.0.2.99', 30080, '198.51.100.7'), m.readers())), /^Mode:/m, 'no frontend: no mode');
  },
);
