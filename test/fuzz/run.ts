// make fuzz: fuzzed packets through every tc program (the node devices'
// svcmap_tc_in/out, the pods' veths' svcmap_veth_in/out) and the XDP program
// (svcmap_xdp, which also takes what the cases send 'out') until each program
// has run at least --packets of them (default 1,000,000), every one
// checked as test/fuzz/fixtures/tc-fuzzer.ts says; the counters are held to
// the packets run after every round. The seed is random unless --seed gives
// one, and printed first: a failure is reproduced with the same seed (fast-check
// prints the case, shrunk, and the run's path).
//   node test/fuzz/run.ts [--packets N] [--seed S] [--objects tc,veth,xdp]
import { parseArgs } from 'node:util';
import fc from 'fast-check';
import { caseArb, sendCase } from './fixtures/cases.ts';
import { TcFuzzer } from './fixtures/tc-fuzzer.ts';
import { TC_OBJECTS, type TcObjectName } from '../bpf/fixtures/tc-harness.ts';

const { values } = parseArgs({ options: { packets: { type: 'string' }, seed: { type: 'string' }, objects: { type: 'string' } } });
const packets = Number(values.packets ?? 1_000_000);
const seed = values.seed === undefined ? Math.floor(Math.random() * 2 ** 31) : Number(values.seed);
if (!Number.isSafeInteger(packets) || packets < 1) throw new Error(`--packets: a positive integer, got ${values.packets}`);
if (!Number.isSafeInteger(seed)) throw new Error(`--seed: an integer, got ${values.seed}`);
const ALL = Object.keys(TC_OBJECTS) as TcObjectName[];
const objects = (values.objects?.split(',') ?? ALL) as TcObjectName[];
const unknown = objects.filter((o) => !ALL.includes(o));
if (unknown.length) throw new Error(`--objects: ${unknown.join(', ')}: not one of ${ALL.join(', ')}`);

/** Cases per round: the flows are forgotten between rounds, so that conntrack never fills. */
const ROUND = 20_000;

console.log(`fuzz: seed ${seed}, at least ${packets} packets per tc and XDP program`);
for (const object of objects) {
  if (!fuzzObject(object)) process.exitCode = 1;
}

/** One object's two programs until each ran `packets`; false when a check failed (printed). */
function fuzzObject(object: TcObjectName): boolean {
  const names = [TC_OBJECTS[object].in, TC_OBJECTS[object].out].filter(Boolean).join(' / ');
  const hasOut = TC_OBJECTS[object].out !== undefined;
  const fz = new TcFuzzer(object);
  const started = process.hrtime.bigint();
  let round = 0;
  try {
    while (fz.ran.in < packets || (hasOut && fz.ran.out < packets)) {
      // Each round a seed of its own, derived from the run's: a failure names the round, and --seed with it reproduces the run.
      fc.assert(
        fc.property(caseArb, (c) => {
          sendCase(c, (s) => fz.run(s));
        }),
        { seed: seed + round, numRuns: ROUND },
      );
      fz.checkTotals();
      fz.clearFlows();
      round++;
      const s = Number(process.hrtime.bigint() - started) / 1e9;
      console.log(
        `${object} round ${round}: ${names}: ${fz.ran.in} / ${fz.ran.out} packets, ${fz.refused} refused by the kernel, ${s.toFixed(0)} s`,
      );
    }
    const totals = fz.checkTotals();
    console.log(`${object} outcomes (hook/reason packets):`);
    for (const [k, v] of [...fz.outcomes].sort()) console.log(`  ${k.padEnd(34)} ${v}`);
    console.log(`${object}: counters add up: ${totals.in} = ${fz.ran.in} run, ${totals.out} = ${fz.ran.out} run`);
    console.log(`${object}: passed, seed ${seed}`);
    return true;
  } catch (err) {
    console.error(`${object}: FAILED in round ${round} (seed ${seed}; this round's fast-check seed ${seed + round})`);
    console.error(err instanceof Error ? err.message : err);
    if (err instanceof Error && err.cause instanceof Error) console.error(err.cause.message);
    return false;
  } finally {
    fz.close();
  }
}
