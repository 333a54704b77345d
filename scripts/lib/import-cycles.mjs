// Import circles among the TypeScript sources of apps/ and libs/ (`npm run lint` fails on any).
// A circle ties its files together: none can be read, tested or moved without the others, and
// ES modules evaluate one of them half-initialised. Type-only imports count: they tie the files
// as much for a reader.
import { readdirSync, readFileSync, existsSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import ts from 'typescript';

/** Every .ts file under `dirs` (specs and declaration files aside). */
export function sourceFiles(root, dirs) {
  const out = [];
  const walk = (dir) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      if (entry.name === 'node_modules' || entry.name === 'dist') continue;
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (/\.tsx?$/.test(entry.name) && !/\.(spec|d)\.tsx?$/.test(entry.name)) out.push(path);
    }
  };
  for (const d of dirs) if (existsSync(join(root, d))) walk(join(root, d));
  return out;
}

/** The modules a file imports or re-exports, as written. */
export function importsOf(text, fileName = 'x.ts') {
  const source = ts.createSourceFile(fileName, text, ts.ScriptTarget.Latest, false);
  const specifiers = [];
  for (const statement of source.statements) {
    if ((ts.isImportDeclaration(statement) || ts.isExportDeclaration(statement)) && statement.moduleSpecifier) {
      if (ts.isStringLiteral(statement.moduleSpecifier)) specifiers.push(statement.moduleSpecifier.text);
    }
  }
  return specifiers;
}

/** The file a specifier names: relative paths, and `#tern/<lib>` (a library's index); packages are not ours. */
export function resolveSpecifier(root, from, specifier) {
  let base;
  if (specifier.startsWith('.')) base = resolve(dirname(from), specifier);
  else if (specifier.startsWith('#tern/')) {
    const lib = specifier.slice('#tern/'.length);
    return lib === 'client' ? undefined : join(root, 'libs', lib, 'src', 'index.ts');
  } else return undefined;
  const stem = base.replace(/\.(m?js|tsx?)$/, '');
  for (const candidate of [`${stem}.ts`, `${stem}.tsx`, join(base, 'index.ts')]) if (existsSync(candidate)) return candidate;
  return undefined;
}

/** The strongly connected components of more than one file, or of one file importing itself (Tarjan). */
export function cycles(graph) {
  let index = 0;
  const stack = [];
  const onStack = new Set();
  const indices = new Map();
  const low = new Map();
  const found = [];
  const visit = (v) => {
    // Iterative: a deep import chain must not overflow the call stack.
    const work = [[v, 0]];
    indices.set(v, index);
    low.set(v, index);
    index++;
    stack.push(v);
    onStack.add(v);
    while (work.length) {
      const frame = work[work.length - 1];
      const [node, i] = frame;
      const edges = graph.get(node) ?? [];
      if (i < edges.length) {
        frame[1]++;
        const w = edges[i];
        if (!indices.has(w)) {
          indices.set(w, index);
          low.set(w, index);
          index++;
          stack.push(w);
          onStack.add(w);
          work.push([w, 0]);
        } else if (onStack.has(w)) low.set(node, Math.min(low.get(node), indices.get(w)));
        continue;
      }
      work.pop();
      if (work.length) {
        const parent = work[work.length - 1][0];
        low.set(parent, Math.min(low.get(parent), low.get(node)));
      }
      if (low.get(node) === indices.get(node)) {
        const component = [];
        let w;
        do {
          w = stack.pop();
          onStack.delete(w);
          component.push(w);
        } while (w !== node);
        if (component.length > 1 || (graph.get(node) ?? []).includes(node)) found.push(component.sort());
      }
    }
  };
  for (const v of graph.keys()) if (!indices.has(v)) visit(v);
  return found;
}

/** The import graph of apps/ and libs/ under `root`, and its circles as paths relative to `root`. */
export function importCycles(root) {
  const graph = new Map();
  for (const file of sourceFiles(root, ['apps', 'libs'])) {
    const targets = importsOf(readFileSync(file, 'utf8'), file)
      .map((s) => resolveSpecifier(root, file, s))
      .filter(Boolean);
    graph.set(file, [...new Set(targets)]);
  }
  return cycles(graph).map((c) => c.map((f) => relative(root, f)));
}
