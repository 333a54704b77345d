import { constants, createReadStream, createWriteStream } from 'node:fs';
import { chmod, copyFile, mkdir, open, truncate, utimes, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { VOLUME_CHUNK_BYTES, type VolumeManifest } from '#tern/contracts';
import { inParallel, sha256Of, sharedBuffer, volumePath } from '#tern/volumes';
import type { ChunkCache } from './chunk-cache.js';
import { type ChunkSource, VolumeMountError } from './chunk-sources.js';

/** Where a chunk's bytes go in a tree: a file and the offset in it. */
interface Place {
  target: string;
  offset: number;
}

/**
 * Writes the files of a volume version under `dir` from its chunks. The chunks this machine lacks
 * are fetched `source.parallel` at once; each one's verified bytes go straight to their places in
 * the tree's files and, unless the tree is `readOnly` (which then holds them for the cache: see
 * `holdTree`), into the cache, from the same buffer. Chunks already cached (or fetched by another
 * mount at the same moment) are copied from the cache: a reflink where the filesystem has them
 * for a file of one chunk; chunks a read-only tree holds are read back from it and verified. A
 * file's chunks are whole chunks but its last (as `chunksOf` and commits cut them), so chunk i
 * lies at i chunks.
 */
export async function writeTree(
  manifest: VolumeManifest,
  dir: string,
  cache: ChunkCache,
  source: ChunkSource,
  readOnly = false,
): Promise<void> {
  await mkdir(dir, { recursive: true, mode: 0o755 });
  const files = manifest.files.map((file) => {
    const checked = volumePath(file.path);
    if ('problem' in checked) throw new VolumeMountError(`volume ${manifest.volume}: ${checked.problem}`);
    return { ...file, target: join(dir, ...checked.path.split('/')) };
  });
  const places = new Map<string, Place[]>();
  for (const file of files) {
    await mkdir(dirname(file.target), { recursive: true, mode: 0o755 });
    // Every file at its size first, so chunks land in any order.
    await writeFile(file.target, '');
    if (file.size) await truncate(file.target, file.size);
    for (const [i, hex] of file.chunks.entries()) {
      const list = places.get(hex) ?? [];
      list.push({ target: file.target, offset: i * VOLUME_CHUNK_BYTES });
      places.set(hex, list);
    }
  }
  const delivered = new Set<string>();
  const missing = [...places.keys()].filter((hex) => !cache.has(hex) && !cache.inTree(hex));
  // One buffer per fetch in flight, reused by the next fetch once its chunk is written (a fresh
  // 4 MiB buffer per chunk kept the garbage collector busy), over shared memory so that its
  // digest is taken by another thread without a copy.
  const free: Buffer[] = [];
  await inParallel(missing, source.parallel, async (hex) => {
    const buffer = free.pop() ?? sharedBuffer(VOLUME_CHUNK_BYTES);
    const deliver = async (bytes: Uint8Array) => {
      for (const place of places.get(hex)!) await writeAt(place, bytes);
      delivered.add(hex);
    };
    const fetch = () => source.fetch(hex, buffer);
    try {
      await (readOnly ? cache.deliver(hex, fetch, source.from, deliver) : cache.ensure(hex, fetch, source.from, deliver));
    } finally {
      free.push(buffer);
    }
  });
  // The chunks left are copied one at a time, each through the same buffer.
  const spare = () => (free[0] ??= sharedBuffer(VOLUME_CHUNK_BYTES));
  for (const file of files) {
    for (const [i, hex] of file.chunks.entries()) {
      if (delivered.has(hex)) continue;
      const place = { target: file.target, offset: i * VOLUME_CHUNK_BYTES };
      if (await copyFromTree(cache, hex, place, spare)) continue;
      const cached = await cache.ensure(hex, () => source.fetch(hex, spare()), source.from);
      if (file.chunks.length === 1) await copyFile(cached, file.target, constants.COPYFILE_FICLONE);
      else await pipeline(createReadStream(cached), createWriteStream(file.target, { flags: 'r+', start: place.offset }));
    }
    await chmod(file.target, file.mode & 0o777);
    const mtime = new Date(file.mtime);
    await utimes(file.target, mtime, mtime);
  }
}

/**
 * Tells the cache where the chunks of a read-only tree now in place at `dir` lie, so that another
 * tree (the volume's next version, a read-write copy) copies them from it rather than fetching.
 */
export function holdTree(manifest: VolumeManifest, dir: string, cache: ChunkCache): void {
  for (const file of manifest.files) {
    const checked = volumePath(file.path);
    if ('problem' in checked) continue;
    const path = join(dir, ...checked.path.split('/'));
    for (const [i, hex] of file.chunks.entries()) {
      const offset = i * VOLUME_CHUNK_BYTES;
      cache.holdInTree(hex, { path, offset, size: Math.min(VOLUME_CHUNK_BYTES, file.size - offset) });
    }
  }
}

/**
 * Copies a chunk a read-only tree holds to `place` (read into the buffer `buffer` gives) once its
 * bytes still match its digest; false when no tree holds it, or the tree went or changed under it
 * (then it is fetched as any other).
 */
async function copyFromTree(cache: ChunkCache, hex: string, place: Place, buffer: () => Buffer): Promise<boolean> {
  const span = cache.inTree(hex);
  if (!span || span.size > VOLUME_CHUNK_BYTES) return false;
  const bytes = buffer().subarray(0, span.size);
  try {
    const handle = await open(span.path, 'r');
    try {
      const { bytesRead } = await handle.read(bytes, 0, span.size, span.offset);
      if (bytesRead !== span.size) return false;
    } finally {
      await handle.close();
    }
  } catch {
    return false;
  }
  if ((await sha256Of(bytes)) !== hex) return false;
  await writeAt(place, bytes);
  return true;
}

async function writeAt(place: Place, bytes: Uint8Array): Promise<void> {
  const handle = await open(place.target, 'r+');
  try {
    for (let at = 0; at < bytes.length;) at += (await handle.write(bytes, at, bytes.length - at, place.offset + at)).bytesWritten;
  } finally {
    await handle.close();
  }
}
