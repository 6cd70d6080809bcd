// What svcmap_tc_in does after a translation, decided by the FIB: redirect
// (TC_ACT_REDIRECT, TTL down by one) when the route is a forwardable
// unicast one, else TC_ACT_OK for the stack. BPF_PROG_TEST_RUN does FIB
// lookups in the caller's network namespace, so the scenarios run in a child
// process inside a private one (unshare --net) with routes of its own: the
// outcome does not depend on this machine's routes or sysctls, and nothing
// is changed outside the child's namespace, which ends with it.
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { parseIpv4 } from './fixtures/packets.ts';
import { translated } from './fixtures/tc-expect.ts';
import { TC_ACT_OK, TC_ACT_REDIRECT, TC_ACT_SHOT } from './fixtures/tc-harness.ts';

interface Outcome {
  name: string;
  retval: number;
  input: Buffer;
  output: Buffer;
  /** The datapath counters the packet moved. */
  counted: Record<string, number>;
}

// No probe and no skip: without unshare --net these scenarios cannot run, and that is a failure.
const outcomes = new Map<string, Outcome>();
const child = fileURLToPath(new URL('./fixtures/tc-netns-child.ts', import.meta.url));
const run = spawnSync('unshare', ['--net', '--', process.execPath, child], { encoding: 'utf8', timeout: 60_000 });
if (run.status !== 0)
  throw new Error(
    `the namespace child failed (status ${run.status}, signal ${run.signal}${run.error ? `, ${run.error.message}` : ''}):\n${run.stderr}`,
  );
for (const line of run.stdout.trim().split('\n')) {
  const o = JSON.parse(line) as { name: string; retval: number; input: string; output: string; counted: Record<string, number> };
  outcomes.set(o.name, {
    name: o.name,
    retval: o.retval,
    input: Buffer.from(o.input, 'hex'),
    output: Buffer.from(o.output, 'hex'),
    counted: o.counted,
  });
}

const get = (name: string): Outcome => {
  const o = outcomes.get(name);
  if (!o) throw new Error(`no outcome named ${name}`);
  return o;
};
const result = (o: Outcome) => ({ retval: o.retval, packetOut: o.output, durationNs: 0 });

t.test('redirect decisions in a private namespace', async (t) => {
  t.test('a translated packet to a routed backend is redirected, TTL down by one', async (t) => {
    for (const name of ['remote backend, no neighbour', 'remote backend, neighbour known', 'later packet of the flow', 'local backend']) {
      const o = get(name);
      t.equal(o.retval, TC_ACT_REDIRECT, `${name}: TC_ACT_REDIRECT`);
      const out = translated(t, result(o), o.input, name);
      t.equal(out.ttl, parseIpv4(o.input).ttl - 1, `${name}: TTL decremented`);
    }
    const out = parseIpv4(get('remote backend, no neighbour').output);
    t.same([out.saddr, out.daddr, out.dport], ['198.51.100.1', '10.244.2.5', 8080], 'and test_run hands back the rewritten packet');
  });

  t.test('the reply of a SNATed flow is redirected to the client', async (t) => {
    const o = get('reply to the SNAT port');
    t.equal(o.retval, TC_ACT_REDIRECT);
    const out = translated(t, result(o), o.input, 'reply');
    t.same([out.saddr, out.sport, out.daddr, out.dport], ['198.51.100.1', 30001, '203.0.113.7', 40001]);
  });

  t.test('routes the program must not take go to the stack, translated', async (t) => {
    for (const name of [
      'blackholed backend',
      'unreachable backend',
      'backend on a local address',
      'larger than the egress MTU, no neighbour',
      'larger than the egress MTU, neighbour known',
      'forwarding disabled',
      'TTL 1',
    ]) {
      const o = get(name);
      t.equal(o.retval, TC_ACT_OK, `${name}: TC_ACT_OK`);
      const out = translated(t, result(o), o.input, name);
      t.equal(out.ttl, parseIpv4(o.input).ttl, `${name}: TTL left for the stack`);
      t.equal(out.dport, 8080, `${name}: DNATed all the same`);
    }
  });

  t.test('a SNATed flow takes the address of the device the FIB sends it out of', async (t) => {
    const o = get('SNAT out of a second device');
    t.equal(o.retval, TC_ACT_REDIRECT);
    const out = translated(t, result(o), o.input, 'second device');
    t.same([out.saddr, out.daddr, out.dport], ['192.0.2.2', '10.244.3.5', 8080], "d2's address, not lo's (the node IP)");
    const reply = get("reply to the second device's address");
    t.equal(reply.retval, TC_ACT_REDIRECT);
    const back = translated(t, result(reply), reply.input, 'reply to d2');
    t.same(
      [back.saddr, back.sport, back.daddr, back.dport],
      ['198.51.100.1', 30006, '203.0.113.7', 40020],
      'the reply to that address is translated back',
    );
    const moved = parseIpv4(get('after the address changed, a new flow').output);
    t.equal(moved.saddr, '192.0.2.3', 'a new flow after the map changed takes the new address');
    const older = parseIpv4(get('after the address changed, the older flow').output);
    t.equal(older.saddr, '192.0.2.2', 'a flow from before keeps the address its entries hold');
  });

  t.test('SNAT without a forwardable route or without a device address drops, untranslated', async (t) => {
    for (const name of [
      'SNAT, blackholed backend',
      'SNAT, unreachable backend',
      'SNAT, backend on a local address',
      'SNAT, forwarding disabled',
      'SNAT, the egress device has no address',
    ]) {
      t.equal(get(name).retval, TC_ACT_SHOT, `${name}: TC_ACT_SHOT`);
    }
  });

  t.test('egress never redirects', async (t) => {
    const o = get('egress reply of the local backend');
    t.equal(o.retval, TC_ACT_OK);
    const out = translated(t, result(o), o.input, 'egress');
    t.same([out.saddr, out.sport], ['198.51.100.1', 30005]);
    t.equal(out.ttl, parseIpv4(o.input).ttl);
  });

  t.test('each packet is counted once, under what the FIB made of it', async (t) => {
    const want: Record<string, string> = {
      'remote backend, no neighbour': 'tc_ingress/translated',
      'remote backend, neighbour known': 'tc_ingress/translated',
      'later packet of the flow': 'tc_ingress/translated',
      'local backend': 'tc_ingress/translated',
      'reply to the SNAT port': 'tc_ingress/reply_translated',
      'blackholed backend': 'tc_ingress/to_stack_no_route',
      'unreachable backend': 'tc_ingress/to_stack_no_route',
      'backend on a local address': 'tc_ingress/to_stack_no_route',
      'forwarding disabled': 'tc_ingress/to_stack_no_route',
      'SNAT, blackholed backend': 'tc_ingress/snat_no_route',
      'SNAT, unreachable backend': 'tc_ingress/snat_no_route',
      'SNAT, backend on a local address': 'tc_ingress/snat_no_route',
      'SNAT, forwarding disabled': 'tc_ingress/snat_no_route',
      'SNAT, the egress device has no address': 'tc_ingress/no_snat_address',
      'SNAT out of a second device': 'tc_ingress/translated',
      "reply to the second device's address": 'tc_ingress/reply_translated',
      'after the address changed, a new flow': 'tc_ingress/translated',
      'after the address changed, the older flow': 'tc_ingress/translated',
      'larger than the egress MTU, no neighbour': 'tc_ingress/to_stack_mtu',
      'larger than the egress MTU, neighbour known': 'tc_ingress/to_stack_mtu',
      'TTL 1': 'tc_ingress/to_stack_ttl',
      'egress reply of the local backend': 'tc_egress/reply_translated',
    };
    for (const [name, counter] of Object.entries(want)) t.same(get(name).counted, { [counter]: 1 }, `${name}: ${counter}`);
  });

  t.test('every scenario ran', async (t) => {
    t.equal(outcomes.size, 22);
  });
});
