#!/usr/bin/env node
// The node agent (`tern-agent`). Runs the compiled code; `npm run build` (or npm run up / npm test) builds it.
import { existsSync } from 'node:fs';
const entry = new URL('../dist/apps/agent/src/cli.js', import.meta.url);
if (!existsSync(entry)) {
  process.stderr.write('tern-agent: not built yet; run `npm run build` in the Tern checkout first\n');
  process.exit(1);
}
await import(entry.href);
