// watchNetlink: the shim's thread wakes the event loop when rtnetlink
// messages of the subscribed groups arrive, in the network namespace of the
// thread that subscribed, and close() ends it. Run in the private namespace
// of the tc unit tests (the main thread's own), so the changes made here
// touch nothing of this machine.
import t from 'tap';
import { RTMGRP_IPV4_IFADDR, RTMGRP_IPV4_ROUTE, RTMGRP_LINK, watchNetlink } from '../../src/bpf/netlink.ts';
import { enterPrivateNet, privateNetIp } from './fixtures/private-net.ts';

enterPrivateNet();
// A watch does not keep the process alive (the agent has its servers for that): this test holds it open while it waits.
const keepAlive = setInterval(() => {}, 1000);
t.teardown(() => clearInterval(keepAlive));

/** Resolves at the next notification; a test that waits in vain fails by tap's timeout, not by a clock here. */
function nextChange(groups: number): { changed: Promise<void>; close(): void; count(): number } {
  let n = 0;
  let resolve!: () => void;
  const changed = new Promise<void>((r) => (resolve = r));
  const w = watchNetlink(groups, () => {
    n++;
    resolve();
  });
  return { changed, close: () => w.close(), count: () => n };
}

t.test('an address added wakes the IFADDR subscriber', async (t) => {
  privateNetIp('link', 'add', 'nl0', 'type', 'veth', 'peer', 'name', 'nl0p');
  privateNetIp('link', 'set', 'nl0', 'up');
  const w = nextChange(RTMGRP_IPV4_IFADDR);
  t.teardown(() => w.close());
  privateNetIp('addr', 'add', '192.0.2.40/24', 'dev', 'nl0');
  await w.changed;
  t.ok(w.count() >= 1, 'notified');
});

t.test('a route added wakes the ROUTE subscriber; a link change the LINK one', async (t) => {
  const routes = nextChange(RTMGRP_IPV4_ROUTE);
  t.teardown(() => routes.close());
  privateNetIp('route', 'add', '198.18.0.0/24', 'via', '192.0.2.41', 'dev', 'nl0');
  await routes.changed;
  const links = nextChange(RTMGRP_LINK);
  t.teardown(() => links.close());
  privateNetIp('link', 'set', 'nl0p', 'up');
  await links.changed;
  t.pass('both notified');
});

t.test('after close() nothing more arrives', async (t) => {
  const all = nextChange(RTMGRP_LINK | RTMGRP_IPV4_IFADDR | RTMGRP_IPV4_ROUTE);
  all.close();
  const witness = nextChange(RTMGRP_IPV4_IFADDR);
  t.teardown(() => witness.close());
  privateNetIp('addr', 'add', '192.0.2.42/24', 'dev', 'nl0');
  await witness.changed; // the change happened and was delivered to a live watch
  t.equal(all.count(), 0, 'the closed watch saw nothing');
});
