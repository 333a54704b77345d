import { constants, createReadStream, createWriteStream } from 'node:fs';
import { chmod, copyFile, mkdir, open, truncate, utimes, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { VOLUME_CHUNK_BYTES, type VolumeManifest } from '#tern/contracts';
import { inParallel, volumePath } from '#tern/volumes';
import type { ChunkCache } from './chunk-cache.js';
import { type ChunkSource, VolumeMountError } from './chunk-sources.js';

/** Where a chunk's bytes go in a tree: a file and the offset in it. */
interface Place {
  target: string;
  offset: number;
}

/**
 * Writes the files of a volume version under `dir` from its chunks. The chunks this machine lacks
 * are fetched `source.parallel` at once; each one's verified bytes go into the cache and, from
 * the same buffer, straight to their places in the tree's files (no second read of the cache
 * file). Chunks already cached (or fetched by another mount at the same moment) are copied from
 * the cache: a reflink where the filesystem has them for a file of one chunk. A file's chunks are
 * whole chunks but its last (as `chunksOf` and commits cut them), so chunk i lies at i chunks.
 */
export async function writeTree(manifest: VolumeManifest, dir: string, cache: ChunkCache, source: ChunkSource): Promise<void> {
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
  const missing = [...places.keys()].filter((hex) => !cache.has(hex));
  await inParallel(missing, source.parallel, (hex) =>
    cache.ensure(
      hex,
      () => source.fetch(hex),
      source.from,
      async (bytes) => {
        for (const place of places.get(hex)!) await writeAt(place, bytes);
        delivered.add(hex);
      },
    ),
  );
  for (const file of files) {
    for (const [i, hex] of file.chunks.entries()) {
      if (delivered.has(hex)) continue;
      const cached = await cache.ensure(hex, () => source.fetch(hex), source.from);
      if (file.chunks.length === 1) await copyFile(cached, file.target, constants.COPYFILE_FICLONE);
      else await pipeline(createReadStream(cached), createWriteStream(file.target, { flags: 'r+', start: i * VOLUME_CHUNK_BYTES }));
    }
    await chmod(file.target, file.mode & 0o777);
    const mtime = new Date(file.mtime);
    await utimes(file.target, mtime, mtime);
  }
}

async function writeAt(place: Place, bytes: Uint8Array): Promise<void> {
  const handle = await open(place.target, 'r+');
  try {
    for (let at = 0; at < bytes.length;) at += (await handle.write(bytes, at, bytes.length - at, place.offset + at)).bytesWritten;
  } finally {
    await handle.close();
  }
}
