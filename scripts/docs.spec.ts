import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import type { Command } from 'commander';
import { DeploymentSpec, describeFields } from '../libs/contracts/src/index.js';
import { ternProgram } from '../apps/cli/src/program.js';

/**
 * The README introduces and links out; the manual lives under docs/. These checks keep the two
 * joined and true: every page is reachable from the README, no relative link of any Markdown
 * file in the repository points at a file or a heading that is not there, every `tern …` shown
 * names commands and options the CLI has, and the spec's reference follows DeploymentSpec.
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

  it('shows examples/hello-python/tern.yaml as it is (less its comment lines)', () => {
    const shown = /```yaml\n([\s\S]*?)```/.exec(readme)?.[1];
    const file = readFileSync(join(ROOT, 'examples', 'hello-python', 'tern.yaml'), 'utf8');
    expect(shown).toBe(
      `${file
        .split('\n')
        .filter((l) => !l.startsWith('# '))
        .join('\n')
        .trim()}\n`,
    );
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

describe('docs/spec.md', () => {
  it('describes every field of DeploymentSpec, in its order, and no other', () => {
    const rows = [...readFileSync(join(ROOT, 'docs', 'spec.md'), 'utf8').matchAll(/^\| `([a-z_]+)` \|/gm)].map((m) => m[1]);
    expect(rows).toEqual(describeFields(DeploymentSpec).map((f) => f.name));
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

const PAGES = [
  'README.md',
  ...readdirSync(join(ROOT, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
];

/** The shell of a Markdown file: the lines of ```bash and ```sh blocks, and each inline code span (table pipes unescaped). */
function codeOf(markdown: string): string[] {
  const fence = /^```([^\n]*)\n([\s\S]*?)^```/gm;
  const fenced = [...markdown.matchAll(fence)].filter((m) => /^(bash|sh|shell|console)\b/.test(m[1]!)).flatMap((m) => m[2]!.split('\n'));
  const inline = [...markdown.replace(fence, '').matchAll(/`([^`\n]+)`/g)].map((m) => m[1]!.replace(/\\\|/g, '|'));
  return [...fenced, ...inline];
}

/** Each `tern` invocation in a line of code, as its words up to a comment, pipe or end of command. */
export function invocations(line: string): string[][] {
  const out: string[][] = [];
  for (const m of line.matchAll(/(?:^|[\s($=])(?:npx |sudo npx )?tern ((?:[^#;&)`|\n]|\|(?=\S))*)/g)) {
    const words = m[1]!.trim().split(/\s+/).filter(Boolean);
    if (words.length) out.push(words);
  }
  return out;
}

const sub = (cmd: Command, name: string) => cmd.commands.find((c) => c.name() === name || c.aliases().includes(name));

/** What is wrong with one invocation, or undefined. */
export function problem(program: Command, words: string[]): string | undefined {
  let cmd = program;
  let i = 0;
  // Walk down while the command has subcommands and the next word is not an option.
  while (cmd.commands.length && i < words.length && !words[i]!.startsWith('-')) {
    if (/^[<…]/.test(words[i]!)) return undefined; // a placeholder: `tern <command> --help`
    const alternatives = words[i]!.split(/[|/]/);
    const found = alternatives.map((a) => sub(cmd, a));
    const missing = alternatives.filter((_, k) => !found[k]);
    if (missing.length) return `tern ${words.slice(0, i + 1).join(' ')}: no command ${missing.join(', ')} under ${cmd.name()}`;
    cmd = found[0]!;
    i++;
  }
  if (i === 0 && words.length && !['--help', '--version', '-h', '-V'].includes(words[0]!)) {
    return `tern ${words.join(' ')}: no command`;
  }
  const options = new Set(['--help', '-h', ...cmd.options.flatMap((o) => [o.long, o.short].filter((x): x is string => !!x))]);
  for (const w of words.slice(i)) {
    if (w === '--') break; // what follows is the command's own (sandbox exec … -- sh -c)
    const flag = /^(--?[A-Za-z][\w-]*)/.exec(w)?.[1];
    if (flag && !options.has(flag) && !(cmd === program && flag === '--version')) {
      return `tern ${words.join(' ')}: ${cmd.name()} has no option ${flag}`;
    }
  }
  return undefined;
}

describe('tern commands shown in the README and docs/', () => {
  const program = ternProgram();

  it.each(PAGES)('%s names only commands and options the CLI has', (page) => {
    const lines = codeOf(readFileSync(join(ROOT, page), 'utf8'));
    const wrong = lines.flatMap((l) => invocations(l).map((w) => problem(program, w))).filter(Boolean);
    expect(wrong).toEqual([]);
  });

  it('shows some commands at all (the reader finds them)', () => {
    const all = PAGES.flatMap((p) => codeOf(readFileSync(join(ROOT, p), 'utf8')).flatMap(invocations));
    expect(all.length).toBeGreaterThan(50);
  });

  it('catches an unknown command, subcommand or option', () => {
    expect(problem(program, ['task', 'put', 'q', '--wait'])).toBeUndefined();
    expect(problem(program, ['deployment', 'stop|start|delete', 'hello'])).toBeUndefined();
    expect(problem(program, ['nats', 'user', 'create', 'x', '--allow', 'events'])).toBeUndefined();
    expect(problem(program, ['tasks', 'put'])).toMatch(/no command tasks/);
    expect(problem(program, ['task', 'push'])).toMatch(/no command push/);
    expect(problem(program, ['task', 'put', 'q', '--no-such'])).toMatch(/no option --no-such/);
  });

  it('reads invocations out of shell lines', () => {
    expect(invocations('id=$(npx tern sandbox create --cpu 0.5)   # prints the id')).toEqual([['sandbox', 'create', '--cpu', '0.5']]);
    expect(invocations("printf 'a:b' | npx tern secret set team  # sealed")).toEqual([['secret', 'set', 'team']]);
    expect(invocations('npx tern deployment stop|start|delete hello')).toEqual([['deployment', 'stop|start|delete', 'hello']]);
    expect(invocations('import tern; tern.volume.commit()')).toEqual([]);
  });
});
