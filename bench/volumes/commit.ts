import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { open, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { VOLUME_CHUNK_BYTES } from '#tern/contracts';
import { inParallel, type RegistryBlobs } from '#tern/volumes';

/**
 * Writes `mib` MiB of random bytes as `name` into a read-write mount's copy on the machine (what
 * the container would write: the bench runs as root beside the agent) and returns each chunk's
 * bytes' digests in the file's order.
 */
export async function writeIntoCopy(ternHome: string, containerId: string, volume: string, name: string, mib: number): Promise<string> {
  const agents = join(ternHome, 'agent');
  for (const d of existsSync(agents) ? await readdir(agents) : []) {
    const dir = join(agents, d, 'volumes', 'rw', containerId, volume);
    if (!existsSync(dir)) continue;
    const path = join(dir, name);
    const handle = await open(path, 'w');
    try {
      for (let i = 0; i < mib; i++) await handle.write(randomBytes(2 ** 20));
      await handle.sync();
    } finally {
      await handle.close();
    }
    return path;
  }
  throw new Error(`no read-write copy of ${volume} for container ${containerId} under ${agents}`);
}

/**
 * The commit's floor: the file's chunks pushed as RegistryBlobs.put pushes them (HEAD, POST, then one PUT of the
 * bytes) to a scratch repository of the same registry, 16 at once, read from the file a chunk at
 * a time: no hashing by the client (the digests are known), no commit. Seconds and bytes.
 */
export async function barePuts(path: string, blobs: RegistryBlobs, digests: string[]): Promise<{ seconds: number; bytes: number }> {
  const handle = await open(path, 'r');
  let bytes = 0;
  const t0 = performance.now();
  try {
    await inParallel(
      digests.map((hex, i) => ({ hex, i })),
      16,
      async ({ hex, i }) => {
        const chunk = Buffer.allocUnsafe(VOLUME_CHUNK_BYTES);
        const { bytesRead } = await handle.read(chunk, 0, chunk.length, i * VOLUME_CHUNK_BYTES);
        await blobs.put(hex, chunk.subarray(0, bytesRead));
        bytes += bytesRead;
      },
    );
  } finally {
    await handle.close();
  }
  return { seconds: (performance.now() - t0) / 1000, bytes };
}

/** The sha256 of each chunk of the file, as a commit cuts it. */
export async function chunkDigests(path: string): Promise<string[]> {
  const handle = await open(path, 'r');
  const digests: string[] = [];
  try {
    const chunk = Buffer.allocUnsafe(VOLUME_CHUNK_BYTES);
    for (let at = 0; ; at += VOLUME_CHUNK_BYTES) {
      const { bytesRead } = await handle.read(chunk, 0, chunk.length, at);
      if (!bytesRead) break;
      digests.push(Buffer.from(await crypto.subtle.digest('SHA-256', chunk.subarray(0, bytesRead))).toString('hex'));
    }
  } finally {
    await handle.close();
  }
  return digests;
}
