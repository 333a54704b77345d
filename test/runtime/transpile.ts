import { randomBytes } from 'node:crypto';
import { mkdir, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

export const REPO_ROOT = fileURLToPath(new URL('../..', import.meta.url));

/**
 * The runtime lib as plain ESM JavaScript, for a child `node` process standing in for the agent
 * (the owner-death test kills it). Transpiled, not type-checked: tsc does that elsewhere. Put
 * under the repo so bare imports (execa, yaml) resolve from its node_modules.
 */
export async function transpileRuntimeLib(): Promise<{ entry: string; cleanup: () => Promise<void> }> {
  const src = join(REPO_ROOT, 'libs/runtime/src');
  const out = join(REPO_ROOT, '.tern', `test-runtime-${randomBytes(4).toString('hex')}`);
  const walk = async (dir: string): Promise<string[]> => {
    const entries = await readdir(dir, { withFileTypes: true });
    const files = await Promise.all(entries.map((e) => (e.isDirectory() ? walk(join(dir, e.name)) : [join(dir, e.name)])));
    return files.flat();
  };
  for (const file of await walk(src)) {
    if (!file.endsWith('.ts') || file.endsWith('.spec.ts')) continue;
    const { outputText } = ts.transpileModule(await readFile(file, 'utf8'), {
      fileName: file,
      compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022, verbatimModuleSyntax: true },
    });
    const target = join(out, relative(src, file)).replace(/\.ts$/, '.js');
    await mkdir(dirname(target), { recursive: true });
    await writeFile(target, outputText);
  }
  return { entry: join(out, 'index.js'), cleanup: () => rm(out, { recursive: true, force: true }) };
}
