// A short, seeded fuzz run of every tc program and the XDP program: the node
// devices' (svcmap_tc_in/out), the pods' veths' (svcmap_veth_in/out) and the
// node devices' XDP (svcmap_xdp). make fuzz
// runs a million packets and more per program, its seed chosen at random and
// printed. Every packet is checked as test/fuzz/fixtures/tc-fuzzer.ts says,
// the counters add up to the packets run, and the run reaches the outcomes
// that matter, so a generator that stopped producing translatable packets
// fails here instead of fuzzing nothing.
import fc from 'fast-check';
import t from 'tap';
import type { TcObjectName } from '../bpf/fixtures/tc-harness.ts';
import { caseArb, sendCase } from './fixtures/cases.ts';
import { TcFuzzer } from './fixtures/tc-fuzzer.ts';

const SEED = 20261203;
const CASES = 3000;

const MUST_REACH: Record<TcObjectName, string[]> = {
  tc: [
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
    'tc_ingress/dsr_accepted',
    'tc_ingress/dsr_bad_frontend',
    'tc_ingress/dsr_malformed',
    'tc_egress/passed',
    'tc_egress/reply_translated',
  ],
  veth: [
    'veth_ingress/translated',
    'veth_ingress/passed',
    'veth_ingress/malformed',
    'veth_ingress/other_protocol',
    'veth_ingress/no_backend',
    'veth_egress/reply_translated',
    'veth_egress/passed',
  ],
  xdp: [
    'xdp/translated',
    'xdp/reply_translated',
    'xdp/passed',
    'xdp/passed_to_tc',
    'xdp/malformed',
    'xdp/other_protocol',
    'xdp/no_backend',
    'xdp/source_denied',
    'xdp/ipv6_ext_header',
  ],
};

for (const object of ['tc', 'veth', 'xdp'] as const) {
  t.test(`${object}: ${CASES} seeded cases: every packet counted once, untouched when passed, no valid checksum broken`, async (t) => {
    const fz = new TcFuzzer(object);
    t.teardown(() => fz.close());
    fc.assert(
      fc.property(caseArb, (c) => {
        sendCase(c, (s) => fz.run(s));
      }),
      { seed: SEED, numRuns: CASES },
    );
    const totals = fz.checkTotals();
    t.equal(totals.in, fz.ran.in, `the in program's counters add up to the ${fz.ran.in} packets it ran`);
    t.equal(totals.out, fz.ran.out, `the out program's counters add up to the ${fz.ran.out} packets it ran`);
    if (object !== 'xdp') t.ok(fz.ran.out > CASES / 4, `the out program ran ${fz.ran.out} packets`);
    for (const outcome of MUST_REACH[object]) {
      t.ok((fz.outcomes.get(outcome) ?? 0) > 0, `reached ${outcome} (${fz.outcomes.get(outcome) ?? 0})`);
    }
    t.comment(
      [...fz.outcomes]
        .sort()
        .map(([k, v]) => `${k} ${v}`)
        .join(', '),
    );
  });
}
