// Every relative link in the user docs (README.md, docs/, the chart's README,
// bench/results/HISTORY.md) names a file of the repository, and an anchor names a
// heading of its target: the docs are read from a clone, where nothing outside
// it exists (../shared/DESIGN.md was such a link).
import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

function markdown(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? markdown(join(dir, e.name)) : e.name.endsWith('.md') ? [join(dir, e.name)] : [],
  );
}

// bench/results/summary.md is left out: the bench writes it as a fragment of the root README, with links from there.
const DOCS = [
  join(ROOT, 'README.md'),
  join(ROOT, 'charts/svcmap/README.md'),
  join(ROOT, 'bench/results/HISTORY.md'),
  ...markdown(join(ROOT, 'docs')),
];
// Linked before they exist: docs/compatibility.md comes with \`svcmap preflight\` (a link to it that is still missing is not reported).
const PENDING = new Set(['docs/compatibility.md']);

/** The text outside fenced code blocks and inline code. */
function prose(text: string): string {
  return text.replace(/^```[\s\S]*?^```/gm, '').replace(/`[^`\n]*`/g, '');
}

/** GitHub's anchors for a file's headings. */
function anchors(text: string): Set<string> {
  const out = new Set<string>();
  const seen = new Map<string, number>();
  for (const m of prose(text).matchAll(/^#{1,6}\s+(.+?)\s*#*\s*$/gm)) {
    const base = m[1]!
      .replace(/<[^>]+>/g, '')
      .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .replace(/\s/g, '-');
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n ? `${base}-${n}` : base);
  }
  // Headings written in inline code keep their words.
  for (const m of text.matchAll(/^#{1,6}\s+(.+?)\s*$/gm)) {
    out.add(
      m[1]!
        .toLowerCase()
        .replace(/[^\p{L}\p{N}\s_-]/gu, '')
        .replace(/\s/g, '-'),
    );
  }
  return out;
}

t.test('relative links resolve', async (t) => {
  const broken: string[] = [];
  let checked = 0;
  for (const file of DOCS) {
    const text = readFileSync(file, 'utf8');
    for (const m of prose(text).matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) {
      const link = m[1]!;
      if (/^[a-z][a-z0-9+.-]*:/i.test(link)) continue; // https:, mailto:
      checked++;
      const [path, anchor] = link.split('#') as [string, string | undefined];
      const target = path === '' ? file : resolve(dirname(file), decodeURIComponent(path));
      const where = `${relative(ROOT, file)}: ${link}`;
      if (!target.startsWith(ROOT)) broken.push(`${where} (outside the repository)`);
      else if (!existsSync(target)) {
        if (!PENDING.has(relative(ROOT, target))) broken.push(`${where} (no such file)`);
      } else if (anchor && target.endsWith('.md') && statSync(target).isFile() && !anchors(readFileSync(target, 'utf8')).has(anchor))
        broken.push(`${where} (no such heading)`);
    }
  }
  t.ok(checked > 20, `${checked} links checked`);
  t.same(broken, [], broken.length ? `broken links:\n  ${broken.join('\n  ')}` : 'every link resolves');
});
