import { readFileSync } from 'node:fs';

function findVersion(): string {
  // Works from source (libs/config/src) and from the build (dist/libs/config/src).
  for (const rel of ['../../../package.json', '../../../../package.json']) {
    try {
      const pkg = JSON.parse(readFileSync(new URL(rel, import.meta.url), 'utf8')) as { name?: string; version?: string };
      if (pkg.name === 'tern' && pkg.version) return pkg.version;
    } catch {
      /* try the next location */
    }
  }
  return '0.0.0';
}

export const TERN_VERSION = findVersion();
