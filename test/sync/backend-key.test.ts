// backendAddrKey: one key per (address, port, protocol), exact at the edges
// of every field, numeric for TCP and UDP.
import t from 'tap';
import { backendAddrKey } from '../../src/sync/state.ts';

t.test('distinct addresses get distinct keys; equal ones equal keys', async (t) => {
  const addrs = ['0.0.0.0', '0.0.0.1', '10.1.0.1', '10.1.0.2', '255.255.255.254', '255.255.255.255'];
  const ports = [0, 1, 8080, 65534, 65535];
  const protos = [6, 17, 31, 132];
  const seen = new Map<number | string, string>();
  for (const addr of addrs) for (const port of ports) for (const proto of protos) {
    const k = backendAddrKey({ addr, port, proto });
    const what = `${addr}:${port}/${proto}`;
    t.equal(backendAddrKey({ addr: `${addr}`, port, proto }), k, `${what} is stable`);
    if (seen.has(k)) t.fail(`${what} and ${seen.get(k)} share key ${k}`);
    seen.set(k, what);
    if (proto < 32) t.ok(Number.isSafeInteger(k), `${what}: an exact integer`);
  }
  t.equal(seen.size, addrs.length * ports.length * protos.length);
});
