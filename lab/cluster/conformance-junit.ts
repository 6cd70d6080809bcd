// The results of upstream e2e.test runs, read from the JUnit XML its
// framework writes (--report-dir: junit_01.xml, Ginkgo's reporter). Every
// spec of the suite is in it, the ones the focus filtered out as
// <skipped message="skipped"/>; a spec skipped while running says why after
// "skipped - ". Pure: text in, results out.

export type SpecState = 'passed' | 'failed' | 'skipped';

export interface JunitCase {
  /** The spec's full text without Ginkgo's "[It] " prefix. */
  name: string;
  /** Ginkgo's status attribute: passed, failed, skipped, pending, panicked, interrupted, aborted, timedout. */
  status: string;
  seconds: number;
  /** The <failure> / <error> text, or the <skipped> message. */
  message: string;
  /** Not run at all: left out by the focus / skip filters. */
  filteredOut: boolean;
}

export interface SpecResult {
  name: string;
  state: SpecState;
  seconds: number;
  /** Why it failed (first lines of the failure) or was skipped. */
  reason: string;
  /** Which run (shard) reported it. */
  shard?: number;
}

const ENTITIES: Record<string, string> = { quot: '"', amp: '&', lt: '<', gt: '>', apos: "'" };

export function decodeXml(s: string): string {
  return s.replace(/&(#x[0-9a-fA-F]+|#[0-9]+|[a-z]+);/g, (m, e: string) => {
    if (e.startsWith('#x')) return String.fromCodePoint(parseInt(e.slice(2), 16));
    if (e.startsWith('#')) return String.fromCodePoint(parseInt(e.slice(1), 10));
    return ENTITIES[e] ?? m;
  });
}

function attrs(tag: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const m of tag.matchAll(/([\w:-]+)="([^"]*)"/g)) out[m[1]!] = decodeXml(m[2]!);
  return out;
}

function stripCdata(s: string): string {
  return s.replace(/<!\[CDATA\[([\s\S]*?)\]\]>/g, '$1');
}

/** Every <testcase> of a JUnit file. */
export function parseJunit(xml: string): JunitCase[] {
  const cases: JunitCase[] = [];
  // <testcase ...>body</testcase> or <testcase .../>
  const re = /<testcase\b([^>]*?)(\/>|>([\s\S]*?)<\/testcase>)/g;
  for (const m of xml.matchAll(re)) {
    const a = attrs(m[1]!);
    const body = m[3] ?? '';
    const name = (a.name ?? '').replace(/^\[It\] /, '');
    const failure = /<(failure|error)\b([^>]*?)(?:\/>|>([\s\S]*?)<\/\1>)/.exec(body);
    const skipped = /<skipped\b([^>]*?)(?:\/>|>[\s\S]*?<\/skipped>)/.exec(body);
    let status = a.status ?? '';
    let message = '';
    if (failure) {
      const fa = attrs(failure[2] ?? '');
      message = [fa.message ?? '', decodeXml(stripCdata(failure[3] ?? ''))].filter(Boolean).join('\n');
      if (!status) status = 'failed';
    } else if (skipped) {
      message = attrs(skipped[1] ?? '').message ?? 'skipped';
      if (!status) status = 'skipped';
    } else if (!status) {
      status = 'passed';
    }
    cases.push({
      name,
      status,
      seconds: Number(a.time ?? 0) || 0,
      message,
      filteredOut: status === 'skipped' && message === 'skipped',
    });
  }
  return cases;
}

const FAILED_STATES = new Set(['failed', 'panicked', 'interrupted', 'aborted', 'timedout', 'error']);

export function stateOf(c: JunitCase): SpecState {
  if (FAILED_STATES.has(c.status)) return 'failed';
  if (c.status === 'passed') return 'passed';
  return 'skipped';
}

/** The first meaningful lines of a failure, for a one-line summary. */
export function shortReason(message: string, maxLen = 300): string {
  const lines = message
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l && !/^In \[\w+\] at:/.test(l) && !/^\[FAILED\]\s*$/.test(l));
  const text = lines
    .slice(0, 3)
    .join(' | ')
    .replace(/^\[(FAILED|PANICKED|TIMEDOUT|INTERRUPTED)\]\s*/, '');
  return text.length > maxLen ? `${text.slice(0, maxLen - 3)}...` : text;
}

/** Specs (It nodes) and suite-level nodes ([SynchronizedBeforeSuite], [ReportAfterSuite] ...). */
export function isSuiteNode(c: JunitCase): boolean {
  return /^\[(Synchronized)?(Before|After)Suite\]|^\[Report(Before|After)Suite\]|^\[DeferCleanup \(Suite\)\]/.test(c.name);
}

/**
 * The results of the selected specs over several runs (shards), each of which
 * was given a part of them: a spec counts as run by the shard that did not
 * filter it out. A spec of a shard that wrote no report (e2e.test crashed or
 * was killed) failed with that shard's error; a selected spec that no shard
 * ran is skipped ("not run"). Suite-level failures are returned separately.
 */
export function mergeResults(
  shards: ReadonlyArray<{ shard: number; assigned: readonly string[]; cases: readonly JunitCase[] | undefined; error?: string }>,
  selected: readonly string[],
): { specs: SpecResult[]; suiteFailures: SpecResult[] } {
  const byName = new Map<string, SpecResult>();
  const suiteFailures: SpecResult[] = [];
  for (const s of shards) {
    if (s.cases === undefined) {
      for (const name of s.assigned)
        byName.set(name, { name, state: 'failed', seconds: 0, reason: `no report: ${s.error ?? 'e2e.test wrote none'}`, shard: s.shard });
      continue;
    }
    for (const c of s.cases) {
      if (isSuiteNode(c)) {
        if (stateOf(c) === 'failed')
          suiteFailures.push({ name: c.name, state: 'failed', seconds: c.seconds, reason: shortReason(c.message), shard: s.shard });
        continue;
      }
      if (c.filteredOut) continue;
      const state = stateOf(c);
      const reason = state === 'failed' ? shortReason(c.message) : state === 'skipped' ? c.message.replace(/^skipped - /, '') : '';
      byName.set(c.name, { name: c.name, state, seconds: c.seconds, reason, shard: s.shard });
    }
  }
  const specs = selected.map((name) => byName.get(name) ?? { name, state: 'skipped' as const, seconds: 0, reason: 'not run' });
  // Specs that ran but were not in the selection (the focus matched more than the listing said).
  for (const [name, r] of byName) if (!selected.includes(name)) specs.push(r);
  return { specs, suiteFailures };
}

export function counts(specs: readonly SpecResult[]): Record<SpecState, number> {
  const c = { passed: 0, failed: 0, skipped: 0 };
  for (const s of specs) c[s.state]++;
  return c;
}
