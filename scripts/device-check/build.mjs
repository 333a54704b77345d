#!/usr/bin/env node
// Builds what the device check carries to a lent GPU machine (docs/operations.md, "The device check"):
// .device-check/device-check.mjs, one file bundling the agent's discovery, runtime and GPU
// prover with libs/proof's verifier (rolldown); with --with-tools also runc and this machine's
// node binary (xz-compressed: the device machine may have neither, and carry is 64 MiB).
import { copyFileSync, mkdirSync, statSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'rolldown';

const root = join(dirname(fileURLToPath(import.meta.url)), '../..');
const out = join(root, '.device-check');
mkdirSync(out, { recursive: true });

await build({
  input: join(root, 'scripts/device-check/device-check.ts'),
  platform: 'node',
  resolve: { alias: { '#tern': join(root, 'libs') } },
  plugins: [
    {
      // '#tern/x' is libs/x/src/index.ts in the sources (package.json's "types" condition).
      name: 'tern-libs',
      resolveId: (id) => (id.startsWith('#tern/') ? join(root, 'libs', id.slice('#tern/'.length), 'src/index.ts') : undefined),
    },
  ],
  // Nest's optional peers (websockets, express) stay unresolved: nothing here loads them.
  onLog: (level, log, handler) => (log.code === 'UNRESOLVED_IMPORT' ? undefined : handler(level, log)),
  output: {
    file: join(out, 'device-check.mjs'),
    format: 'esm',
    codeSplitting: false,
    banner: "import { createRequire as __cr } from 'node:module'; const require = __cr(import.meta.url);",
  },
});
console.log(`bundle: ${join(out, 'device-check.mjs')} (${(statSync(join(out, 'device-check.mjs')).size / 2 ** 20).toFixed(1)} MiB)`);

if (process.argv.includes('--with-tools')) {
  const runc = execFileSync('sh', ['-c', 'command -v runc'], { encoding: 'utf8' }).trim();
  copyFileSync(runc, join(out, 'runc'));
  execFileSync('sh', ['-c', `xz -T0 -6 -c "${process.execPath}" > "${join(out, 'node.xz')}"`]);
  for (const f of ['runc', 'node.xz']) console.log(`${f}: ${(statSync(join(out, f)).size / 2 ** 20).toFixed(1)} MiB`);
}
