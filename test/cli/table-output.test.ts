// -o wide and --no-headers through the compiled CLI, on real pins (one
// ClusterIP, no agent): every command that prints tables takes both, wide
// has more columns, --no-headers no header line, the rows the same
// otherwise; json ignores --no-headers, as kubectl's does.
import t from 'tap';
import { assertBuilt } from '../../lab/agent-process.ts';
import { pinOneService } from './one-service-pins.ts';
import { runSvcmap } from './run.ts';
import { cells, checkTableStyles } from './table-styles.ts';

assertBuilt();
const pinDir = pinOneService(t, 'tables');

function svcmap(...args: string[]): string[] {
  const r = runSvcmap([...args, '--pin-dir', pinDir]);
  if (r.status !== 0) throw new Error(`svcmap ${args.join(' ')}: exit ${r.status}: ${r.stderr}`);
  return r.stdout.replace(/\n$/, '').split('\n');
}

/** The command's output as -o table, -o wide and --no-headers (and both: wide without headers). */
const styles = (...args: string[]) => ({
  plain: svcmap(...args),
  wide: svcmap(...args, '-o', 'wide'),
  bare: svcmap(...args, '--no-headers'),
  wideBare: svcmap(...args, '-o', 'wide', '--no-headers'),
});

t.test('svcmap dump', async (t) => {
  const s = styles('dump');
  checkTableStyles(t, s, ['REV-NAT', 'BACKEND-IDS'], 'dump');
  t.same(s.wideBare.map(cells), [['10.96.7.1:80/TCP', 'ClusterIP', 'random', '1', '1', '1', '10.244.7.1:8080']], 'wide without headers');
  t.same(
    svcmap('dump', '--map', 'svcmap_be', '--no-headers'),
    svcmap('dump', '--map', 'svcmap_be'),
    '--map: one line an entry, no header to drop',
  );
});

t.test('svcmap status', async (t) => {
  const s = styles('status');
  const maps = (lines: string[]) => lines.slice(lines.indexOf('MAPS') + 1, lines.indexOf('', lines.indexOf('MAPS')));
  t.notOk(
    s.bare.some((l) => /^(pin directory|PROGRAMS|MAPS)/.test(l)),
    'no titles',
  );
  const bareMaps = s.bare.slice(s.bare.indexOf('') + 1, s.bare.indexOf('', s.bare.indexOf('') + 1));
  checkTableStyles(t, { plain: maps(s.plain), wide: maps(s.wide), bare: bareMaps }, ['ID', 'PIN'], 'status maps');
  t.match(maps(s.wide).join('\n'), new RegExp(`svcmap_svc +hash +2/16 +\\S+ +\\d+ +${pinDir}/svcmap_svc +`), "the map's id and pin");
});

t.test('svcmap explain', async (t) => {
  const s = styles('explain', '10.96.7.1:80/TCP');
  const table = (lines: string[]) => lines.filter((l) => l.startsWith('  '));
  checkTableStyles(t, { plain: table(s.plain), wide: table(s.wide), bare: table(s.bare) }, ['ZONE'], 'explain backends');
  t.same(
    s.bare.filter((l) => !l.startsWith('  ')),
    s.plain.filter((l) => !l.startsWith('  ')),
    'the facts around the table are the same',
  );
});

t.test('-o json ignores --no-headers; yaml is not a format of explain', async (t) => {
  t.same(svcmap('status', '-o', 'json', '--no-headers'), svcmap('status', '-o', 'json'));
  const r = runSvcmap(['explain', '10.96.7.1:80', '-o', 'yaml', '--pin-dir', pinDir]);
  t.equal(r.status, 2);
  t.match(r.stderr, /^svcmap explain: --output: must be table, wide or json\n$/);
});
