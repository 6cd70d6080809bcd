// RELEASES, the record of releases and their commits: the repository's file
// parses, names commits this history has, and every version this build
// carries (package.json, the chart's version and appVersion) is newer than
// the newest release, so that no build can pass for a release it is not.
// The reader's errors name the line and the field.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import t from 'tap';
import { parse } from 'yaml';
import { compareVersions, findRelease, parseReleases, previousRelease, RELEASES_FILE, releasesFile } from '../../lab/release/releases.ts';

const ROOT = new URL('../../', import.meta.url);
const pkg = JSON.parse(readFileSync(new URL('package.json', ROOT), 'utf8')) as { version: string };
const chart = parse(readFileSync(new URL('charts/svcmap/Chart.yaml', ROOT), 'utf8')) as { version: string; appVersion: string };
const git = (...args: string[]) => execFileSync('git', args, { cwd: ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).trim();

t.test("the repository's RELEASES: each release a commit of this history", async (t) => {
  const all = releasesFile();
  t.ok(all.length >= 1, `${all.length} release(s): ${all.map((r) => r.version).join(', ')}`);
  t.ok(findRelease(all, 'v0.1.0'), 'v0.1.0 is recorded');
  for (const r of all) {
    t.equal(git('cat-file', '-t', r.commit), 'commit', `${r.version}: ${r.commit} is a commit here`);
    // An ancestor of HEAD: the release's code is part of what this build grew from.
    t.doesNotThrow(() => git('merge-base', '--is-ancestor', r.commit, 'HEAD'), `${r.version}: an ancestor of HEAD`);
    if (r.provisional) t.comment(`${r.version}: provisional (${RELEASES_FILE}:${r.line})`);
  }
});

t.test("this build's versions are newer than every release", async (t) => {
  const newest = releasesFile().at(-1)!;
  t.ok(compareVersions(pkg.version, newest.version) > 0, `package.json ${pkg.version} > ${newest.version}`);
  t.ok(compareVersions(chart.version, newest.version) > 0, `Chart.yaml version ${chart.version} > ${newest.version}`);
  t.equal(chart.appVersion, pkg.version, "the chart's appVersion is package.json's version: the image it deploys by default is this build");
  t.equal(previousRelease(releasesFile(), pkg.version).version, newest.version, 'the upgrade test starts from the newest release');
});

t.test('semantic version order, pre-releases before their release', async (t) => {
  const order = ['0.1.0', '0.1.1', '0.2.0-dev', '0.2.0-rc.1', '0.2.0-rc.2', '0.2.0-rc.10', '0.2.0', '1.0.0-alpha', '1.0.0'];
  for (let i = 0; i + 1 < order.length; i++) {
    t.ok(compareVersions(order[i]!, order[i + 1]!) < 0, `${order[i]} < ${order[i + 1]}`);
    t.ok(compareVersions(order[i + 1]!, order[i]!) > 0, `${order[i + 1]} > ${order[i]}`);
  }
  t.equal(compareVersions('v0.1.0', '0.1.0'), 0, 'a leading v is ignored');
  t.throws(() => compareVersions('0.1', '0.1.0'), /"0\.1" is not a semantic version/);
});

const H1 = 'a'.repeat(40);
const H2 = 'b'.repeat(40);

t.test('lines, comments, provisional', async (t) => {
  const all = parseReleases(`# header\n\nv0.1.0 ${H1}\nv0.2.0 ${H2}   # provisional: not yet decided\n`);
  t.same(all, [
    { version: 'v0.1.0', commit: H1, provisional: false, line: 3 },
    { version: 'v0.2.0', commit: H2, provisional: true, line: 4 },
  ]);
  t.equal(previousRelease(all, '0.2.0-dev').version, 'v0.1.0', 'a pre-release of 0.2.0 upgrades from 0.1.0');
  t.equal(previousRelease(all, '0.3.0-dev').version, 'v0.2.0');
  t.throws(() => previousRelease(all, '0.1.0'), /no release in RELEASES is older than 0\.1\.0; recorded: v0\.1\.0, v0\.2\.0/);
  t.throws(() => findRelease(all, 'v9.9.9'), /no release "v9\.9\.9" in RELEASES; recorded: v0\.1\.0, v0\.2\.0/);
});

t.test('bad lines: the error names the line and the field', async (t) => {
  const bad: Array<[string, RegExp]> = [
    [`v0.1.0`, /^RELEASES:1: want "<version> <commit>", got 1 field\(s\)/],
    [`# c\nv0.1.0 ${H1} extra`, /^RELEASES:2: want "<version> <commit>", got 3 field\(s\)/],
    [`0.1.0 ${H1}`, /^RELEASES:1: version "0\.1\.0" must start with v/],
    [`v0.1 ${H1}`, /^RELEASES:1: version: "v0\.1" is not a semantic version/],
    [`v0.1.0 6164509`, /^RELEASES:1: commit "6164509" must be 40 lowercase hex digits/],
    [`v0.1.0 ${H1.toUpperCase()}`, /^RELEASES:1: commit "A{40}" must be 40 lowercase hex digits/],
    [`v0.1.0 ${H1}\nv0.1.0 ${H2}`, /^RELEASES:2: version v0\.1\.0 recorded twice/],
    [`v0.2.0 ${H1}\nv0.1.0 ${H2}`, /^RELEASES:2: version v0\.1\.0 is not newer than v0\.2\.0 \(line 1\): oldest first/],
  ];
  for (const [text, err] of bad) t.throws(() => parseReleases(text), err, JSON.stringify(text));
});
