// A node's bridge keeps its MAC while pods come and go. Without an address of
// its own a Linux bridge takes its lowest port's MAC and changes it when that
// port goes; the other pods' entry for their gateway then points at an address
// nobody owns, and their traffic is lost until they resolve it again.

import t from 'tap';
import { Lab } from '../../lab/index.ts';

t.test("a pod whose veth has the lowest MAC comes and goes; the bridge's MAC stays", async (t) => {
  const lab = await Lab.create();
  t.teardown(() => lab.destroy());
  const node = await lab.node('node', { cidr: '10.251.0.0/24' });
  const mac = async () => (JSON.parse(await lab.ip(node, '-j', 'link', 'show', 'br0')) as Array<{ address: string }>)[0]!.address;
  const before = await mac();
  t.match(before, /^[0-9a-f][26ae](:[0-9a-f]{2}){5}$/, `locally administered, unicast: ${before}`);
  const pod = await lab.pod(node, 'low', '10.251.0.10');
  // The lowest unicast MAC there is: a bridge following its ports would take it.
  await lab.ip(node, 'link', 'set', pod.hostIfname, 'address', '00:00:00:00:00:01');
  t.equal(await mac(), before, 'unchanged with the lowest-MAC port added');
  await lab.ip(node, 'link', 'del', pod.hostIfname);
  t.equal(await mac(), before, 'unchanged with that port gone');
});
