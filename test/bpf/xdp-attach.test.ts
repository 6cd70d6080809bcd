// attachXdp: an XDP program on a veth in driver (native) mode, on a bridge
// (whose driver has no XDP) only in generic mode, the link pinned; a second
// attach with the same pin swaps the program in the same link (an agent
// restart), one in the other mode replaces the link, and rtnetlink says the
// mode. Run in the private namespace of the tc unit tests: the devices made
// here touch nothing of this machine and go with the process.
import { execFileSync } from 'node:child_process';
import { closeSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { newRunId } from '../../lab/names.ts';
import { ensureBpffs, labPinDir } from '../../lab/pins.ts';
import { BpfError } from '../../src/bpf/errors.ts';
import { detachPinnedLink, linkInfo, openPinned, progInfoById } from '../../src/bpf/link.ts';
import { listLinks } from '../../src/bpf/links.ts';
import { BpfObject } from '../../src/bpf/object.ts';
import { ifIndex } from '../../src/bpf/tc.ts';
import { LINK_TYPE_XDP, attachXdp, xdpLinkIfindex, xdpModeOf } from '../../src/bpf/xdp.ts';
import { enterPrivateNet, privateNetIp } from './fixtures/private-net.ts';

enterPrivateNet();
privateNetIp('link', 'add', 'xa0', 'type', 'veth', 'peer', 'name', 'xa0p');
privateNetIp('link', 'add', 'xbr0', 'type', 'bridge');
for (const d of ['xa0', 'xa0p', 'xbr0']) privateNetIp('link', 'set', d, 'up');

const dir = mkdtempSync(join(tmpdir(), 'svcmap-xdp-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
const objPath = join(dir, 'xdp-pass.o');
const src = fileURLToPath(new URL('../fixtures/bpf/xdp-pass.c', import.meta.url));
execFileSync('clang', ['-O2', '-g', '-target', 'bpf', '-I', '/usr/include/x86_64-linux-gnu', '-c', src, '-o', objPath]);
const obj = BpfObject.open(objPath);
obj.load();
t.teardown(() => obj.close());
const progA = obj.programFd('xdp_pass_a');
const progB = obj.programFd('xdp_pass_b');
// A lab run's pin directory: one a killed run leaves is swept by the next.
ensureBpffs();
const pinDir = labPinDir(newRunId(), 'xdp-attach');
t.teardown(() => {
  for (const d of ['xa0', 'xbr0']) {
    const p = join(pinDir, d);
    if (existsSync(p)) detachPinnedLink(p);
  }
  rmSync(pinDir, { recursive: true, force: true });
});

/** The pinned link's id, type, program name and interface. */
function pinned(path: string) {
  const fd = openPinned(path);
  if (fd === undefined) return undefined;
  try {
    const info = linkInfo(fd);
    return { id: info.id, type: info.type, program: progInfoById(info.progId)?.name, ifindex: xdpLinkIfindex(fd) };
  } finally {
    closeSync(fd);
  }
}

t.test('a veth takes XDP in driver mode; a second attach swaps the program in the same link', async (t) => {
  const pin = join(pinDir, 'xa0');
  attachXdp(progA, 'xa0', pin, 'native');
  const first = pinned(pin);
  t.match(first, { type: LINK_TYPE_XDP, program: 'xdp_pass_a', ifindex: ifIndex('xa0') }, 'a pinned XDP link on xa0');
  t.match(xdpModeOf(ifIndex('xa0')), { mode: 'native' }, 'rtnetlink: driver mode');
  attachXdp(progB, 'xa0', pin, 'native');
  const second = pinned(pin);
  t.equal(second?.id, first?.id, 'the same link');
  t.equal(second?.program, 'xdp_pass_b', 'with the new program');
  t.match(listLinks().find((l) => l.name === 'xa0')?.xdp, { mode: 'native' });
});

t.test('the other mode replaces the link', async (t) => {
  const pin = join(pinDir, 'xa0');
  const before = pinned(pin);
  attachXdp(progA, 'xa0', pin, 'generic');
  const after = pinned(pin);
  t.not(after?.id, before?.id, 'a new link');
  t.match(after, { program: 'xdp_pass_a', ifindex: ifIndex('xa0') });
  t.match(xdpModeOf(ifIndex('xa0')), { mode: 'generic' }, 'rtnetlink: generic mode');
  attachXdp(progA, 'xa0', pin, 'native');
  t.match(xdpModeOf(ifIndex('xa0')), { mode: 'native' }, 'and back');
});

t.test('a bridge refuses driver mode, naming the device; generic mode works', async (t) => {
  const pin = join(pinDir, 'xbr0');
  const err = t.throws(() => attachXdp(progA, 'xbr0', pin, 'native')) as unknown as BpfError;
  t.ok(err instanceof BpfError, 'a BpfError');
  t.match(err.message, /attach XDP in native mode on xbr0/);
  t.match(err.code, /^(EOPNOTSUPP|ENOTSUP)$/, 'the driver has no XDP');
  t.equal(pinned(pin), undefined, 'nothing pinned');
  t.equal(xdpModeOf(ifIndex('xbr0')), undefined, 'nothing attached');
  attachXdp(progA, 'xbr0', pin, 'generic');
  t.match(xdpModeOf(ifIndex('xbr0')), { mode: 'generic' });
  t.match(pinned(pin), { program: 'xdp_pass_a', ifindex: ifIndex('xbr0') });
});

t.test('a device replaced under the same name gets a new link; the old pin goes', async (t) => {
  const pin = join(pinDir, 'xbr0');
  const before = pinned(pin);
  privateNetIp('link', 'del', 'xbr0');
  privateNetIp('link', 'add', 'xbr0', 'type', 'bridge');
  privateNetIp('link', 'set', 'xbr0', 'up');
  t.equal(pinned(pin)?.ifindex, 0, 'the old link lost its device');
  attachXdp(progA, 'xbr0', pin, 'generic');
  const after = pinned(pin);
  t.not(after?.id, before?.id, 'a new link');
  t.equal(after?.ifindex, ifIndex('xbr0'), 'on the new device');
  t.match(xdpModeOf(ifIndex('xbr0')), { mode: 'generic' });
});

t.test('detaching the pinned link takes the program off the device', async (t) => {
  const pin = join(pinDir, 'xa0');
  t.ok(detachPinnedLink(pin));
  t.equal(xdpModeOf(ifIndex('xa0')), undefined);
});
