import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { cycles, importCycles, importsOf } from './lib/import-cycles.mjs';

describe('import cycles', () => {
  it('finds every circle, of any length, and a file importing itself; a chain is none', () => {
    const graph = new Map<string, string[]>([
      ['a', ['b']],
      ['b', ['c']],
      ['c', ['a', 'd']],
      ['d', []],
      ['e', ['e']],
      ['f', ['d']],
    ]);
    expect(cycles(graph)).toEqual([['a', 'b', 'c'], ['e']]);
    expect(
      cycles(
        new Map([
          ['x', ['y']],
          ['y', []],
        ]),
      ),
    ).toEqual([]);
  });

  it('reads imports, type-only imports and re-exports, and nothing else', () => {
    const text = [
      "import { a } from './a.js';",
      "import type { B } from '../b.js';",
      "export { c } from './c.js';",
      "export * from '#tern/contracts';",
      "const d = './d.js';",
      "// import { e } from './e.js';",
    ].join('\n');
    expect(importsOf(text)).toEqual(['./a.js', '../b.js', './c.js', '#tern/contracts']);
  });

  it("resolves relative paths and #tern/<lib> to the library's index, across apps and libs", () => {
    const root = mkdtempSync(join(tmpdir(), 'tern-cycles-'));
    const file = (path: string, text: string) => {
      mkdirSync(dirname(join(root, path)), { recursive: true });
      writeFileSync(join(root, path), text);
    };
    try {
      file('libs/one/src/index.ts', "export * from './x.js';");
      file('libs/one/src/x.ts', "import { y } from '#tern/two';\nexport const x = y;");
      file('libs/two/src/index.ts', "export { y } from './y.js';");
      file('libs/two/src/y.ts', "import type { X } from '#tern/one';\nexport const y = 1;");
      file('apps/app/src/main.ts', "import { x } from '#tern/one';");
      file('apps/app/src/main.spec.ts', "import { x } from './main.js';");
      expect(importCycles(root)).toEqual([['libs/one/src/index.ts', 'libs/one/src/x.ts', 'libs/two/src/index.ts', 'libs/two/src/y.ts']]);
      file('libs/two/src/y.ts', 'export const y = 1;');
      expect(importCycles(root)).toEqual([]);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});
