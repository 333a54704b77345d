import { readdir, readFile, rm, stat, utimes, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { execa } from 'execa';
import { sha256Hex } from './digest.js';

/** The file whose mtime is an unpacked image's last use: survives agent restarts, unlike an in-memory LRU. */
const LAST_USED = 'last-used';
const SIZE = 'bytes';

export interface CachedEntry {
  hex: string;
  dir: string;
  bytes: number;
  lastUsed: number;
}

/** Marks an unpacked image as used now. */
export async function touchImage(dir: string, now = new Date()): Promise<void> {
  const path = join(dir, LAST_USED);
  await utimes(path, now, now).catch(async () => writeFile(path, ''));
}

/** An unpacked image's size on disk, measured once (it never changes) and kept beside it: evictions run on every resolve. */
async function sizeOf(dir: string): Promise<number> {
  const kept = Number(await readFile(join(dir, SIZE), 'utf8').catch(() => ''));
  if (kept > 0) return kept;
  const du = await execa('du', ['-sb', join(dir, 'rootfs')], { reject: false });
  const bytes = Number(du.stdout.split('\t')[0]) || 0;
  if (bytes > 0) await writeFile(join(dir, SIZE), String(bytes)).catch(() => undefined);
  return bytes;
}

/** Every registry image unpacked under `ociDir` (`sha256-<hex>` whose hex is a tag of the layout), with its size on disk. */
export async function cachedImages(ociDir: string): Promise<CachedEntry[]> {
  const out: CachedEntry[] = [];
  for (const name of await readdir(ociDir).catch(() => [] as string[])) {
    const hex = sha256Hex(name.replace(/^sha256-/, 'sha256:'));
    if (!hex) continue;
    const dir = join(ociDir, name);
    const lastUsed = (await stat(join(dir, LAST_USED)).catch(() => undefined))?.mtimeMs;
    if (lastUsed === undefined) continue; // not pulled from a registry (an oci: layout of the agent's own)
    out.push({ hex, dir, bytes: await sizeOf(dir), lastUsed });
  }
  return out;
}

/**
 * Least recently used first, removes unpacked registry images (and their tags in the shared
 * layout, then the blobs no tag needs: `umoci gc`) until the cache fits `maxBytes`. Images in
 * `keep` (used by a container now, or just pulled) stay whatever the total. Returns the digests
 * removed.
 */
export async function evictImages(
  ociDir: string,
  layout: string,
  maxBytes: number,
  keep: ReadonlySet<string>,
  umoci = 'umoci',
): Promise<string[]> {
  const entries = await cachedImages(ociDir);
  let total = entries.reduce((n, e) => n + e.bytes, 0);
  const evicted: string[] = [];
  for (const e of entries.sort((a, b) => a.lastUsed - b.lastUsed)) {
    if (total <= maxBytes) break;
    if (keep.has(`sha256:${e.hex}`)) continue;
    await rm(e.dir, { recursive: true, force: true });
    await execa(umoci, ['rm', '--image', `${layout}:${e.hex}`], { reject: false });
    total -= e.bytes;
    evicted.push(`sha256:${e.hex}`);
  }
  if (evicted.length) await execa(umoci, ['gc', '--layout', layout], { reject: false });
  return evicted;
}
