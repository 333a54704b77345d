// The pieces of `npm run pack` (scripts/pack.mjs): one-file bundles of the compiled CLI and client,
// the client's declarations, the notices of the code a bundle carries, and `npm pack` of a staged folder.
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, sep } from 'node:path';
import { rolldown } from 'rolldown';
import { UserError } from './log.mjs';
import { run } from './proc.mjs';
import { REPO_ROOT } from './paths.mjs';

/** Every name the packages go by; `npm view <name>` answered 404 for each npm one when they were chosen. */
export const PACKAGE_NAMES = { cli: '@tern-gpu/cli', client: '@tern-gpu/client', python: 'tern-gpu' };

/**
 * Tern's version, from the root package.json; the client's package.json and the Python SDK must
 * say the same, so a release never ships two numbers.
 */
export function ternVersion() {
  const version = readJson(join(REPO_ROOT, 'package.json')).version;
  const client = readJson(join(REPO_ROOT, 'sdk', 'typescript', 'package.json')).version;
  const pyproject = readFileSync(join(REPO_ROOT, 'sdk', 'python', 'pyproject.toml'), 'utf8');
  const python = /^version\s*=\s*"([^"]+)"/m.exec(pyproject)?.[1];
  const init = /^__version__\s*=\s*"([^"]+)"/m.exec(readFileSync(join(REPO_ROOT, 'sdk', 'python', 'tern', '__init__.py'), 'utf8'))?.[1];
  const off = [
    ['sdk/typescript/package.json', client],
    ['sdk/python/pyproject.toml', python],
    ['sdk/python/tern/__init__.py', init],
  ].filter(([, v]) => v !== version);
  if (off.length)
    throw new UserError(`package.json says ${version} but ${off.map(([f, v]) => `${f} says ${v}`).join(', ')}: make them agree`);
  return version;
}

/**
 * Bundles a compiled entry (dist/…) and everything it imports, monorepo libs and npm packages alike,
 * into one ESM file, so the package installs with no dependencies. TERN_VERSION becomes a constant:
 * the bundle has no monorepo package.json to read it from. Resolves the bundled node_modules folders.
 */
export async function bundle({ entry, file, version, banner }) {
  const versionModule = join(REPO_ROOT, 'dist', 'libs', 'config', 'src', 'version.js');
  const bundler = await rolldown({
    input: join(REPO_ROOT, entry),
    platform: 'node',
    logLevel: 'warn',
    // The libs' index files re-export Nest modules the CLI never uses; their modules load only if used.
    treeshake: { moduleSideEffects: (id) => !id.startsWith(join(REPO_ROOT, 'dist', 'libs')) || id.includes(`${sep}contracts${sep}`) },
    plugins: [
      {
        name: 'tern-version',
        load: (id) => (id === versionModule ? `export const TERN_VERSION = ${JSON.stringify(version)};\n` : null),
      },
    ],
  });
  try {
    const { output } = await bundler.write({ file, format: 'esm', codeSplitting: false, banner, sourcemap: false });
    return packagesOf(output[0].moduleIds);
  } finally {
    await bundler.close();
  }
}

/** The node_modules package folders the bundled modules come from. */
function packagesOf(moduleIds) {
  const dirs = new Set();
  for (const id of moduleIds) {
    const at = id.lastIndexOf(`${sep}node_modules${sep}`);
    if (at < 0) continue;
    const rest = id.slice(at + 14).split(sep);
    dirs.add(id.slice(0, at + 14) + rest.slice(0, rest[0].startsWith('@') ? 2 : 1).join(sep));
  }
  return [...dirs].sort();
}

/** THIRD_PARTY_NOTICES.md: each bundled package, its version, licence and licence text, as their licences ask. */
export function writeNotices(file, packageDirs) {
  const parts = ['# Third-party notices\n\nThis package bundles the following packages; their licences follow.\n'];
  for (const dir of packageDirs) {
    const pkg = readJson(join(dir, 'package.json'));
    const licence = readdirSync(dir).find((n) => /^(licen[cs]e|copying)/i.test(n) && statSync(join(dir, n)).isFile());
    const text = licence ? readFileSync(join(dir, licence), 'utf8').trim() : `(no licence file; package.json says ${pkg.license})`;
    parts.push(`## ${pkg.name} ${pkg.version} (${pkg.license ?? 'see text'})\n\n\`\`\`\n${text}\n\`\`\`\n`);
  }
  writeFileSync(file, parts.join('\n'));
}

/**
 * The client's declarations: tsc emits them for its sources and the contracts types they import,
 * under types/ with the repository's layout, so their relative imports still resolve.
 */
export async function emitClientTypes(stage) {
  const config = join(stage, 'tsconfig.types.json');
  writeJson(config, {
    extends: join(REPO_ROOT, 'tsconfig.json'),
    compilerOptions: {
      declaration: true,
      emitDeclarationOnly: true,
      sourceMap: false,
      incremental: false,
      types: ['node'],
      typeRoots: [join(REPO_ROOT, 'node_modules', '@types')],
      rootDir: REPO_ROOT,
      outDir: join(stage, 'types'),
    },
    files: [join(REPO_ROOT, 'sdk', 'typescript', 'src', 'index.ts')],
    include: [],
  });
  await must(process.execPath, [join(REPO_ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', config], stage, 'tsc (client types)');
  rmSync(config);
  dropSideEffectImports(join(stage, 'types'));
  const outside = externalImports(join(stage, 'types')).filter((s) => !s.startsWith('node:'));
  if (outside.length) throw new UserError(`the client's declarations import ${outside.join(', ')}, which its package does not carry`);
  return 'types/sdk/typescript/src/index.d.ts';
}

/** `import 'reflect-metadata';` says nothing about types, and would make a consumer install it. */
function dropSideEffectImports(dir) {
  for (const name of readdirSync(dir, { recursive: true })) {
    if (!name.endsWith('.d.ts')) continue;
    const file = join(dir, name);
    writeFileSync(file, readFileSync(file, 'utf8').replace(/^import\s+['"][^'"]+['"];\n/gm, ''));
  }
}

/** Bare module specifiers the .d.ts files under `dir` import. */
function externalImports(dir) {
  const found = new Set();
  for (const name of readdirSync(dir, { recursive: true })) {
    if (!name.endsWith('.d.ts')) continue;
    for (const m of readFileSync(join(dir, name), 'utf8').matchAll(/(?:from|import)\s*\(?\s*['"]([^'"]+)['"]/g)) {
      if (!m[1].startsWith('.')) found.add(m[1]);
    }
  }
  return [...found].sort();
}

/** Copies the Python SDK's sources (what the CLI runs `python3 -m tern.spec` with) into `dir`. */
export function copyPythonSdk(dir) {
  cpSync(join(REPO_ROOT, 'sdk', 'python', 'tern'), join(dir, 'tern'), {
    recursive: true,
    filter: (src) => !src.includes('__pycache__') && (statSync(src).isDirectory() || /\.py$|py\.typed$/.test(src)),
  });
}

/** The Python SDK's wheel, built by its own backend into `out`; its file name. */
export async function buildWheel(out) {
  const script = 'import sys, _build; print(_build.build_wheel(sys.argv[1]))';
  const res = await must('python3', ['-c', script, out], join(REPO_ROOT, 'sdk', 'python'), 'the Python wheel');
  return res.output.trim().split('\n').pop();
}

/** `npm pack` of a staged folder into `out`; the tarball's path (npm's own naming: @a/b 1.0 → a-b-1.0.tgz). */
export async function npmPack(stage, out) {
  await must('npm', ['pack', '--pack-destination', out], stage, `npm pack ${relative(REPO_ROOT, stage)}`);
  const { name, version } = readJson(join(stage, 'package.json'));
  const tarball = join(out, `${name.replace(/^@/, '').replace('/', '-')}-${version}.tgz`);
  if (!existsSync(tarball)) throw new UserError(`npm pack wrote no ${tarball}`);
  return tarball;
}

/** A fresh, empty folder. */
export function freshDir(dir) {
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  return dir;
}

export function readJson(file) {
  return JSON.parse(readFileSync(file, 'utf8'));
}

export function writeJson(file, value) {
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, `${JSON.stringify(value, null, 2)}\n`);
}

export function requireBuilt(file) {
  if (!existsSync(join(REPO_ROOT, file))) throw new UserError(`${file} is missing after the build`);
}

async function must(cmd, args, cwd, what) {
  const res = await run(cmd, args, { cwd, capture: true });
  if (res.code !== 0) throw new UserError(`${what} failed (exit ${res.code}):\n${res.output.slice(-4000)}`);
  return res;
}
