#!/usr/bin/env node
// `npm run lint`'s check that no import circle ties files of apps/ and libs/ together.
import { importCycles } from './lib/import-cycles.mjs';

const found = importCycles(process.cwd());
if (found.length) {
  console.error(`${found.length} import circle(s) in apps/ and libs/; break each (move what both sides need into a file of its own):`);
  for (const files of found) console.error(`  ${files.join(' → ')}`);
  process.exit(1);
}
console.log('no import circles in apps/ and libs/');
