// svcmap completion bash|zsh, as a person loads it: the script the compiled
// CLI prints, sourced into a real bash, asked to complete what a person
// types. It offers every command, and for each command exactly the flags its
// declaration has (so the parser takes each one), and a flag's fixed choices.
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { assertBuilt } from '../../lab/agent-process.ts';
import { allFlags } from '../../src/cli/args.ts';
import { COMMANDS } from '../../src/cli/commands.ts';
import { runSvcmapAsync } from './run.ts';

assertBuilt();

const [bash, zsh, bad] = await Promise.all([
  runSvcmapAsync(['completion', 'bash']),
  runSvcmapAsync(['completion', 'zsh']),
  runSvcmapAsync(['completion', 'fish']),
]);
const dir = mkdtempSync(join(tmpdir(), 'svcmap-completion-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
const script = join(dir, 'pscript.bash');
writeFileSync(script, bash.stdout);

/** What bash offers for the words typed so far (the last one being completed). */
function complete(...typed: string[]): string[] {
  const words = ['svcmap', ...typed].map((w) => `'${w}'`).join(' ');
  const out = execFileSync(
    'bash',
    ['-c', `source '${script}'; COMP_WORDS=(${words}); COMP_CWORD=${typed.length}; _svcmap; printf '%s\\n' "\${COMPREPLY[@]}"`],
    { encoding: 'utf8' },
  );
  return out.split('\n').filter(Boolean).sort();
}

t.test('the scripts: bash, zsh through bashcompinit, anything else a usage error', async (t) => {
  t.equal(bash.status, 0, 'svcmap completion bash: exit 0');
  t.match(bash.stdout, /^complete -F _svcmap svcmap$/m);
  t.equal(zsh.status, 0, 'svcmap completion zsh: exit 0');
  t.match(zsh.stdout, /bashcompinit/);
  t.ok(zsh.stdout.endsWith(bash.stdout), 'zsh loads the same function');
  t.same([bad.status, bad.stderr], [2, 'svcmap completion: SHELL: must be bash or zsh\n']);
});

t.test('commands: every one, and help', async (t) => {
  t.same(complete(''), [...COMMANDS.map((c) => c.spec.name), 'help'].sort());
  t.same(complete('ex'), ['explain']);
  t.same(complete('help', ''), COMMANDS.map((c) => c.spec.name).sort(), 'svcmap help COMMAND');
});

t.test("each command: exactly its declared flags; a flag's choices after it", async (t) => {
  for (const { spec } of COMMANDS) {
    const declared = Object.entries(allFlags(spec))
      .flatMap(([n, f]) => [`--${n}`, ...(f.short ? [`-${f.short}`] : [])])
      .sort();
    t.same(complete(spec.name, '-'), declared, `svcmap ${spec.name} -<TAB>`);
  }
  t.same(complete('dump', '-o', ''), ['json', 'table', 'wide', 'yaml'], 'svcmap dump -o <TAB>');
  t.same(complete('explain', '-o', ''), ['json', 'table', 'wide'], 'svcmap explain -o <TAB>: wide, no yaml');
  for (const c of ['dump', 'status', 'explain'])
    t.same(complete(c, '--no'), ['--no-headers'], `svcmap ${c} --no<TAB>: a command that prints tables`);
  t.same(complete('version', '--output', ''), ['json', 'table'], 'svcmap version --output <TAB>: its own formats');
  t.same(complete('agent', '--lb-algorithm', 'ma'), ['maglev']);
  t.same(complete('dump', '--log-level', ''), ['debug', 'error', 'info', 'warn']);
  mkdirSync(join(dir, 'pins'));
  t.same(
    complete('status', '--pin-dir', join(dir, 'p')),
    [join(dir, 'pins')],
    'a DIR: directories (the script file beside it is not offered)',
  );
});
