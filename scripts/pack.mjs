#!/usr/bin/env node
// `npm run pack`: what a laptop with no clone installs, written to dist/packages/:
//   @tern-gpu/cli     the `tern` command, one bundled file with no npm dependencies (plus the Python
//                     SDK's sources, which `tern deploy app.py` reads decorators with)
//   @tern-gpu/client  the TypeScript client: ESM JS and its .d.ts
//   tern-gpu          the Python SDK's wheel (import name `tern`), from sdk/python/_build.py
// Builds first (npm run build) unless TERN_SKIP_BUILD=1 says dist/ is current. `--out DIR` writes
// them elsewhere (the packages test keeps the checkout's dist/packages untouched).
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative, resolve } from 'node:path';
import { UserError, dim, main, ok, step } from './lib/log.mjs';
import { REPO_ROOT } from './lib/paths.mjs';
import { build } from './lib/setup.mjs';
import {
  PACKAGE_NAMES,
  buildWheel,
  bundle,
  copyPythonSdk,
  emitClientTypes,
  freshDir,
  npmPack,
  readJson,
  requireBuilt,
  ternVersion,
  writeJson,
  writeNotices,
} from './lib/pack.mjs';

const ROOT_PACKAGE = readJson(join(REPO_ROOT, 'package.json'));

function outDir(args) {
  const at = args.indexOf('--out');
  if (at < 0) return join(REPO_ROOT, 'dist', 'packages');
  if (!args[at + 1]) throw new UserError('--out needs a folder: npm run pack -- --out DIR');
  return resolve(args[at + 1]);
}

/** What every package.json of Tern's says alike. */
function common(version) {
  return {
    version,
    license: ROOT_PACKAGE.license,
    type: 'module',
    engines: ROOT_PACKAGE.engines,
  };
}

async function packCli(stage, out, version) {
  step(`Bundling the CLI as ${PACKAGE_NAMES.cli}`);
  requireBuilt('dist/apps/cli/src/main.js');
  const bundled = await bundle({
    entry: 'dist/apps/cli/src/main.js',
    file: join(stage, 'dist', 'tern.js'),
    version,
    banner: '#!/usr/bin/env node',
  });
  // Where python-spec.ts looks for the SDK beside the bundle.
  copyPythonSdk(join(stage, 'dist', 'python-sdk'));
  writeNotices(join(stage, 'THIRD_PARTY_NOTICES.md'), bundled);
  writeJson(join(stage, 'package.json'), {
    name: PACKAGE_NAMES.cli,
    description: "Tern's command line: deploy handlers, call them, run tasks and sandboxes, manage machines and pools",
    ...common(version),
    bin: { tern: 'dist/tern.js' },
    files: ['dist', 'THIRD_PARTY_NOTICES.md'],
  });
  writeFileSync(
    join(stage, 'README.md'),
    `# ${PACKAGE_NAMES.cli}\n\nThe \`tern\` command of Tern, the open-source serverless GPU runtime.\n\n` +
      '```sh\nnpm install -g @tern-gpu/cli\nexport TERN_GATEWAY=https://tern.example.com TERN_TOKEN=<token>   # or ~/.tern/config.json\ntern status\n```\n\n' +
      'Python handlers (`tern deploy app.py`) need `python3`; the SDK the decorators come from ships inside this package.\n',
  );
  return npmPack(stage, out);
}

async function packClient(stage, out, version) {
  step(`Bundling the TypeScript client as ${PACKAGE_NAMES.client}`);
  requireBuilt('dist/sdk/typescript/src/index.js');
  const bundled = await bundle({ entry: 'dist/sdk/typescript/src/index.js', file: join(stage, 'dist', 'index.js'), version });
  if (bundled.length) writeNotices(join(stage, 'THIRD_PARTY_NOTICES.md'), bundled);
  const types = await emitClientTypes(stage);
  writeJson(join(stage, 'package.json'), {
    name: PACKAGE_NAMES.client,
    description: "Typed client of Tern's public API: deploy, invoke, run, put, wait, map and sandboxes",
    ...common(version),
    exports: { '.': { types: `./${types}`, default: './dist/index.js' } },
    types,
    files: ['dist', 'types', ...(bundled.length ? ['THIRD_PARTY_NOTICES.md'] : [])],
  });
  writeFileSync(
    join(stage, 'README.md'),
    `# ${PACKAGE_NAMES.client}\n\nA typed client of the public API of Tern, the open-source serverless GPU runtime: deploy, invoke, ` +
      "run, put and wait, map, sandboxes; errors by status that carry the gateway's message. ESM, Node.js 20.19+, no dependencies " +
      '(a TypeScript program adds `@types/node`).\n\n' +
      "```ts\nimport { TernClient } from '@tern-gpu/client';\n\n" +
      'const tern = new TernClient(); // TERN_GATEWAY / TERN_TOKEN, else ~/.tern/config.json; or new TernClient({ gateway, token })\n' +
      "console.log(await tern.run('squares', { n: 4 }));\n```\n",
  );
  return npmPack(stage, out);
}

await main(async () => {
  const out = outDir(process.argv.slice(2));
  const version = ternVersion();
  if (process.env.TERN_SKIP_BUILD !== '1') await build();
  freshDir(out);
  const stages = mkdtempSync(join(tmpdir(), 'tern-pack-'));
  try {
    const cli = await packCli(freshDir(join(stages, 'cli')), out, version);
    const client = await packClient(freshDir(join(stages, 'client')), out, version);
    step(`Building the Python wheel ${PACKAGE_NAMES.python}`);
    const wheel = join(out, await buildWheel(out));
    for (const file of [cli, client, wheel])
      ok(`${file.startsWith(REPO_ROOT) ? relative(REPO_ROOT, file) : file} ${dim(`(version ${version})`)}`);
  } finally {
    rmSync(stages, { recursive: true, force: true });
  }
});
