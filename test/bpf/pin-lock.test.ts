// The agent's lock on its pin directory (src/bpf/pin-lock.ts), in one
// process (flock locks belong to open files, so two opens here conflict as
// two processes would): a held shared lock keeps cleanup's exclusive one
// out and names this pid; releasing it lets cleanup in; an agent starting
// while a cleanup holds the directory waits, and takes the new directory
// when the cleanup removed the old one. On a claimed lab pin directory.
import { spawn } from 'node:child_process';
import { rmdirSync, statSync } from 'node:fs';
import { once } from 'node:events';
import t from 'tap';
import { claimPinDir, ensureBpffs } from '../../lab/pins.ts';
import { flockHolders, holdPinDir, lockForCleanup } from '../../src/bpf/pin-lock.ts';

ensureBpffs();
const claim = claimPinDir('pinlock');
t.teardown(() => claim.release());
const dir = claim.dir;

t.test("an agent's shared lock: cleanup cannot have the directory, and sees who holds it", async (t) => {
  const agent = holdPinDir(dir);
  const second = holdPinDir(dir);
  t.pass('two agents on one directory both hold it (a restart overlapping its predecessor)');
  const c = lockForCleanup(dir);
  t.same(c, { free: false, holders: [process.pid] });
  agent.release();
  t.equal(lockForCleanup(dir).free, false, 'one agent left still counts');
  second.release();
  const free = lockForCleanup(dir);
  t.equal(free.free, true, "no agent: the exclusive lock is cleanup's");
  if (free.free) free.lock.release();
});

t.test('an agent starting while cleanup holds the directory waits; if the cleanup removed it, it takes a new one', async (t) => {
  const c = lockForCleanup(dir);
  t.equal(c.free, true);
  t.throws(() => holdPinDir(dir, 200), /stays locked by a svcmap cleanup/, 'gives up after its timeout');
  // What cleanup does: remove the directory, then let go.
  rmdirSync(dir);
  if (c.free) c.lock.release();
  const agent = holdPinDir(dir, 2000);
  t.ok(statSync(dir).isDirectory(), 'the agent made the directory again');
  t.same(lockForCleanup(dir), { free: false, holders: [process.pid] }, 'and the new one is held');
  agent.release();
});

t.test("another process's exclusive lock (flock(1), as a cleanup holds it): the agent waits until it is let go", async (t) => {
  const holder = spawn('flock', ['-x', dir, 'sleep', '0.5'], { stdio: 'ignore' });
  t.teardown(() => holder.kill());
  // Until flock(1) has the lock (an event, polled; tap's timeout bounds it).
  let seen = lockForCleanup(dir);
  while (seen.free) {
    seen.lock.release();
    await new Promise((r) => setTimeout(r, 20));
    seen = lockForCleanup(dir);
  }
  t.same(seen, { free: false, holders: [holder.pid] }, 'the other process holds it, and is named');
  const agent = holdPinDir(dir, 60_000);
  // The kernel hands the lock over only once flock(1) let it go (its sleep ended); no clock is read.
  if (holder.exitCode === null) await once(holder, 'exit');
  t.same(lockForCleanup(dir), { free: false, holders: [process.pid] }, 'then holds it');
  agent.release();
});

t.test('/proc/locks: flock lines of this file only, pid 0 (outside this pid namespace) left out', async (t) => {
  const st = { dev: 0x2fn, ino: 4242n }; // major 0, minor 0x2f: an anonymous device like bpffs's
  const locks = [
    '1: FLOCK  ADVISORY  READ  812 00:2f:4242 0 EOF',
    '2: FLOCK  ADVISORY  READ  0 00:2f:4242 0 EOF',
    '3: POSIX  ADVISORY  WRITE 900 00:2f:4242 0 EOF',
    '4: FLOCK  ADVISORY  READ  77 00:2f:4243 0 EOF',
    '5: FLOCK  ADVISORY  WRITE 78 08:01:4242 0 EOF',
    '6: FLOCK  ADVISORY  READ  13 00:2f:4242 0 EOF',
  ].join('\n');
  t.same(flockHolders(st, locks), [13, 812]);
  t.same(flockHolders({ dev: (8n << 8n) | 1n, ino: 4242n }, locks), [78], 'a major device number too');
});
