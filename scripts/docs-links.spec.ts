import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';

/**
 * The README introduces and links out; the manual lives under docs/. These checks keep the two
 * joined: every page is reachable from the README, and no relative link of any Markdown file in
 * the repository points at a file or a heading that is not there.
 */
const ROOT = join(import.meta.dirname, '..');
/** Folders that hold no Markdown of ours. */
const SKIP = new Set(['node_modules', 'dist', 'coverage', '.git', '.tern']);

function markdownFiles(dir = ROOT): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    if (e.name.startsWith('.') || SKIP.has(e.name)) return [];
    const path = join(dir, e.name);
    if (e.isDirectory()) return markdownFiles(path);
    return e.name.endsWith('.md') ? [path] : [];
  });
}

/** The text outside fenced code blocks and inline code, where a link or a heading means one. */
function prose(markdown: string): string {
  return markdown.replace(/^(```|~~~)[^\n]*\n[\s\S]*?^\1[^\n]*$/gm, '').replace(/`[^`\n]*`/g, (code) => code.replace(/[[\]()]/g, ' '));
}

/** GitHub's anchors for a file's headings: lower case, punctuation dropped, spaces as -, repeats numbered. */
export function anchors(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  const withoutFences = markdown.replace(/^(```|~~~)[^\n]*\n[\s\S]*?^\1[^\n]*$/gm, '');
  for (const m of withoutFences.matchAll(/^#{1,6}\s+(.+?)\s*#*\s*$/gm)) {
    const text = m[1]!.replace(/\[([^\]]*)\]\([^)]*\)/g, '$1');
    const slug = text
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .replace(/\s/g, '-');
    const n = seen.get(slug) ?? 0;
    seen.set(slug, n + 1);
    out.add(n === 0 ? slug : `${slug}-${n}`);
  }
  return out;
}

/** Every relative link and image of a file: [text](target) and ![alt](target), outside code. */
export function relativeLinks(markdown: string): string[] {
  const links = [...prose(markdown).matchAll(/!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)].map((m) => m[1]!);
  return links.filter((t) => !/^[a-z][a-z0-9+.-]*:/i.test(t));
}

/** What is wrong with one link of `file`, or undefined. */
function brokenLink(file: string, target: string): string | undefined {
  const [path, anchor] = target.split('#', 2) as [string, string | undefined];
  const resolved = path ? join(dirname(file), decodeURIComponent(path)) : file;
  if (!existsSync(resolved)) return `${target}: no file ${relative(ROOT, resolved)}`;
  if (anchor === undefined) return undefined;
  if (statSync(resolved).isDirectory() || !resolved.endsWith('.md')) return `${target}: an anchor into something that is not Markdown`;
  const known = anchors(readFileSync(resolved, 'utf8'));
  return known.has(decodeURIComponent(anchor)) ? undefined : `${target}: ${relative(ROOT, resolved)} has no heading #${anchor}`;
}

describe('links between the README and docs/', () => {
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');

  it('keeps the README an introduction of at most 250 lines', () => {
    expect(readme.split('\n').length).toBeLessThanOrEqual(250);
  });

  it('links every page under docs/ from the README', () => {
    const linked = new Set(relativeLinks(readme).map((t) => t.split('#')[0]));
    const pages = readdirSync(join(ROOT, 'docs'))
      .filter((f) => f.endsWith('.md'))
      .map((f) => `docs/${f}`);
    expect(pages.filter((p) => !linked.has(p))).toEqual([]);
  });

  it.each(markdownFiles().map((f) => relative(ROOT, f)))('%s: every relative link reaches a file and heading that exist', (file) => {
    const path = join(ROOT, file);
    const broken = relativeLinks(readFileSync(path, 'utf8'))
      .map((t) => brokenLink(path, t))
      .filter(Boolean);
    expect(broken).toEqual([]);
  });
});

describe('the link checker itself', () => {
  it('numbers repeated headings as GitHub does and ignores headings in code', () => {
    const md =
      '# Trust model\n## Trust model\n```bash\n# not a heading\n```\n### `tern.agent.*.invoke.*.v1`\n## One machine: `npm run up`\n';
    expect([...anchors(md)]).toEqual(['trust-model', 'trust-model-1', 'ternagentinvokev1', 'one-machine-npm-run-up']);
  });

  it('finds links and images outside code, not URLs or links shown as code', () => {
    const md = 'See [a](docs/a.md#x) and ![p](p.png), [w](https://x.org), `[no](b.md)`.\n```\n[no](c.md)\n```\n';
    expect(relativeLinks(md)).toEqual(['docs/a.md#x', 'p.png']);
  });
});
