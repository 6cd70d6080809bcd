// A short, seeded fuzz run of svcmap_tc_in and svcmap_tc_out (make fuzz runs
// a million packets and more per program, seed chosen at random and printed):
// every packet is checked as test/fuzz/fixtures/tc-fuzzer.ts says, the
// counters add up to the packets run, and the run reaches the outcomes that
// matter, so a generator that stopped producing translatable packets fails
// here instead of fuzzing nothing.
import fc from 'fast-check';
import t from 'tap';
import { caseArb, sendCase } from './fixtures/cases.ts';
import { TcFuzzer } from './fixtures/tc-fuzzer.ts';

const SEED = 20261203;
const CASES = 3000;

const fz = new TcFuzzer();
t.teardown(() => fz.close());

t.test(
  `${CASES} seeded cases through both tc programs: every packet counted once, untouched when passed, no valid checksum broken`,
  async (t) => {
    fc.assert(
      fc.property(caseArb, (c) => {
        sendCase(c, (s) => fz.run(s));
      }),
      { seed: SEED, numRuns: CASES },
    );
    const totals = fz.checkTotals();
    t.equal(totals.in, fz.ran.in, `tc_ingress counters add up to the ${fz.ran.in} packets run`);
    t.equal(totals.out, fz.ran.out, `tc_egress counters add up to the ${fz.ran.out} packets run`);
    t.ok(fz.ran.out > CASES / 10, `svcmap_tc_out ran ${fz.ran.out} packets`);
    for (const outcome of [
      'tc_ingress/translated',
      'tc_ingress/reply_translated',
      'tc_ingress/icmp_translated',
      'tc_ingress/passed',
      'tc_ingress/malformed',
      'tc_ingress/other_protocol',
      'tc_ingress/no_backend',
      'tc_ingress/source_denied',
      'tc_ingress/fragment',
      'tc_ingress/ipv6_ext_header',
      'tc_egress/passed',
      'tc_egress/reply_translated',
    ]) {
      t.ok((fz.outcomes.get(outcome) ?? 0) > 0, `reached ${outcome} (${fz.outcomes.get(outcome) ?? 0})`);
    }
    t.comment(
      [...fz.outcomes]
        .sort()
        .map(([k, v]) => `${k} ${v}`)
        .join(', '),
    );
  },
);
