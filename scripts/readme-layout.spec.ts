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

/** The names listed before the parenthesis of an apps/ or libs/ line. */
const listed = (text: string) =>
  text
    .replace(/\(.*\)\s*$/, '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
    .sort();

describe("README's repository layout", () => {
  it('names every top-level folder, and none that does not exist', () => {
    expect([...layout().keys()].sort()).toEqual(folders('.'));
  });

  it('lists every app and every library, and none that does not exist', () => {
    const l = layout();
    expect(listed(l.get('apps')!)).toEqual(folders('apps'));
    expect(listed(l.get('libs')!)).toEqual(folders('libs'));
  });
});
