import { cpSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Stack } from './stack.js';

export const EXAMPLES = fileURLToPath(new URL('../../examples', import.meta.url));

/** An example copied into a scratch folder and deployed under another name, with some spec lines changed; its tern.yaml. */
export function exampleSpec(stack: Stack, example: string, name: string, replace: Record<string, string> = {}): string {
  const dir = stack.scratch(name);
  cpSync(join(EXAMPLES, example), dir, { recursive: true });
  let spec = readFileSync(join(dir, 'tern.yaml'), 'utf8').replace(/^name:.*$/m, `name: ${name}`);
  for (const [from, to] of Object.entries(replace)) spec = spec.replace(new RegExp(`^(\\s*)${from}:.*$`, 'm'), `$1${from}: ${to}`);
  writeFileSync(join(dir, 'tern.yaml'), spec);
  return join(dir, 'tern.yaml');
}
