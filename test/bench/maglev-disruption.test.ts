// The bench's Maglev disruption figure: one row per removed backend, each
// close to the ideal 1/N, computed over every position of the agent's table.
import t from 'tap';
import { maglevDisruptionLine, maglevDisruptionOf } from '../../bench/maglev-disruption.ts';

t.test('removing one of 10 backends moves ~10% of the keys', async (t) => {
  const d = maglevDisruptionOf();
  t.equal(d.moved.length, 10, 'one figure per removed backend');
  t.ok(d.mean >= 0.1 - 0.005 && d.mean <= 0.13, `mean ${(d.mean * 100).toFixed(2)}%`);
  t.ok(d.max <= 0.14, `worst ${(d.max * 100).toFixed(2)}%`);
  t.ok(d.keptMovedMean >= 0 && d.keptMovedMean <= 0.03, `keys of kept backends that moved: ${(d.keptMovedMean * 100).toFixed(2)}%`);
  t.match(maglevDisruptionLine(d), /removing one of 10 backends moves \d+\.\d% of the flow keys/);
  const small = maglevDisruptionOf(10, 251);
  t.ok(small.mean >= d.mean - 0.005, `a small table (M = 251) disrupts no less: ${(small.mean * 100).toFixed(1)}%`);
});
