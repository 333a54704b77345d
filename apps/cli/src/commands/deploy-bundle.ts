import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { gzipSync } from 'node:zlib';
import { execa } from 'execa';
import { parseDocument } from 'yaml';

const EXCLUDES = ['node_modules', '.git', '__pycache__', '.venv', '*.pyc'];

/** Reads a spec file (YAML, or JSON, which YAML also reads); a parse error names the file, line and column. */
export function readSpecFile(file: string): Record<string, unknown> {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    throw new Error(`cannot read ${file}: ${(e as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file' : (e as Error).message}`, {
      cause: e,
    });
  }
  const doc = parseDocument(text, { prettyErrors: true });
  const error = doc.errors[0];
  if (error) {
    const pos = error.linePos?.[0];
    const where = pos ? `${file}:${pos.line}:${pos.col}` : file;
    throw new Error(`${where}: invalid YAML: ${error.message.split('\n')[0].replace(/ at line \d+, column \d+:?$/, '')}`);
  }
  const spec: unknown = doc.toJS();
  if (!spec || typeof spec !== 'object' || Array.isArray(spec))
    throw new Error(`${file}: the spec must be a mapping (name: …, kind: …), not ${Array.isArray(spec) ? 'a list' : typeof spec}`);
  return spec as Record<string, unknown>;
}

export interface Bundle {
  digest: string;
  bytes: Buffer;
}

/**
 * The spec's folder as a tar.gz. Names sorted, times and owners zeroed (GNU tar) and gzip
 * without a timestamp, so an unchanged folder gives the same digest and is not uploaded again.
 */
export async function packFolder(dir: string): Promise<Bundle> {
  const excludes = EXCLUDES.map((e) => `--exclude=${e}`);
  const reproducible = ['--sort=name', '--mtime=@0', '--owner=0', '--group=0', '--numeric-owner'];
  let tarball: Uint8Array;
  try {
    tarball = (await execa('tar', ['-c', ...reproducible, ...excludes, '-f', '-', '-C', dir, '.'], { encoding: 'buffer' })).stdout;
  } catch {
    // BSD tar (macOS) lacks the reproducibility flags: the bundle works, only re-uploads are not skipped.
    tarball = (await execa('tar', ['-c', ...excludes, '-f', '-', '-C', dir, '.'], { encoding: 'buffer' })).stdout;
  }
  const bytes = gzipSync(tarball);
  return { digest: `sha256:${createHash('sha256').update(bytes).digest('hex')}`, bytes };
}
