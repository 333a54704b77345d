import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

const ROOT = join(import.meta.dirname, '..');
/** Top-level folders that are made, not kept: no reader needs them in the layout. */
const MADE = new Set(['node_modules', 'dist', 'coverage']);

/** The README's "Repository layout" block: each line's folder and what it says after it. */
function layout(): Map<string, string> {
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
  const block = /## Repository layout\s+```\n([\s\S]*?)```/.exec(readme)?.[1];
  if (!block) throw new Error('README.md has no "Repository layout" block');
  const entries: [string, string][] = [];
  for (const line of block.split('\n')) {
    const m = /^([\w.-]+)\/\s+(.*)$/.exec(line);
    if (m) entries.push([m[1]!, m[2]!]);
  }
  return new Map(entries);
}

const folders = (dir: string) =>
  readdirSync(join(ROOT, dir), { withFileTypes: true })
    .filter((e) => e.isDirectory() && !e.name.startsWith('.') && !MADE.has(e.name))
    .map((e) => e.name)
    .sort();

/** Layout lines that list the folders inside theirs, by name, comma-separated. */
const LISTS = ['apps', 'libs', 'runners', 'sdk', 'examples', 'bench'];

/** The names a list line gives, less what it says about them in parentheses. */
const listed = (text: string) =>
  text
    .replace(/\([^)]*\)/g, '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
    .sort();

describe("README's repository layout", () => {
  it('names every top-level folder, and none that does not exist', () => {
    expect([...layout().keys()].sort()).toEqual(folders('.'));
  });

  it.each(LISTS)('lists every folder in %s/, and none that does not exist', (dir) => {
    const text = layout().get(dir);
    expect(text).toBeDefined();
    expect(listed(text!)).toEqual(folders(dir));
  });

  it('reads a list line as its names, without what the parentheses say', () => {
    expect(listed('gateway, cli (NestJS apps, all of them)')).toEqual(['cli', 'gateway']);
    expect(listed('python, typescript (package tern; @tern/client)')).toEqual(['python', 'typescript']);
  });
});
