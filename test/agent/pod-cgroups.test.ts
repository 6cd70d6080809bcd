// Pods' cgroups found by UID as the kubelet lays them out, with either
// cgroup driver, in a directory tree of the test's own (plain directories:
// the walk reads names and inode numbers only).
import t from 'tap';
import { mkdirSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { findPodCgroups, podUidOfCgroup } from '../../src/agent/datapath/pod-cgroups.ts';

const UID = '0d6f1c2e-3b4a-4c5d-8e9f-a0b1c2d3e4f5';

t.test('directory names: cgroupfs and systemd drivers', async (t) => {
  t.equal(podUidOfCgroup(`pod${UID}`), UID);
  t.equal(podUidOfCgroup(`kubepods-burstable-pod${UID.replace(/-/g, '_')}.slice`), UID);
  t.equal(podUidOfCgroup(`kubepods-pod${UID.replace(/-/g, '_')}.slice`), UID);
  t.equal(podUidOfCgroup(`pod${UID.toUpperCase()}`), UID, 'compared in lower case');
  t.equal(podUidOfCgroup('kubepods'), undefined);
  t.equal(podUidOfCgroup('burstable'), undefined);
  t.equal(podUidOfCgroup('kubepods-besteffort.slice'), undefined);
  t.equal(podUidOfCgroup('podman'), undefined);
  t.equal(podUidOfCgroup('a'.repeat(64)), undefined, "a container's id is no Pod");
});

t.test('every Pod below the root, with its id and depth; not below a Pod', async (t) => {
  const root = mkdtempSync(join(tmpdir(), 'svcmap-podcg-'));
  t.teardown(() => rmSync(root, { recursive: true, force: true }));
  const other = '11111111-2222-4333-8444-555555555555';
  const a = join(root, 'node', 'kubepods', 'burstable', `pod${UID}`);
  const b = join(root, 'kubepods.slice', 'kubepods-besteffort.slice', `kubepods-besteffort-pod${other.replace(/-/g, '_')}.slice`);
  mkdirSync(join(a, 'c0ffee', `pod${other}`), { recursive: true }); // nothing below a Pod counts
  mkdirSync(b, { recursive: true });
  const found = findPodCgroups(root);
  t.same([...found.keys()].sort(), [UID, other].sort());
  t.same(found.get(UID), { path: a, id: statSync(a, { bigint: true }).ino, level: 4 });
  t.equal(found.get(other)!.path, b);
  t.equal(found.get(other)!.level, 3);
  t.same(findPodCgroups(join(root, 'gone')), new Map(), 'a root that is not there: none');
});
