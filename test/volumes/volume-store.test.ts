import { createHash, createPrivateKey, randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync } from 'node:fs';
import { mkdtemp, open, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execa, type ResultPromise } from 'execa';
import { VOLUME_CHUNK_BYTES, type VolumeManifest } from '#tern/contracts';
import { freePort } from '#tern/runtime';
import { BlobStoreError, EMPTY_CONFIG, inParallel, RegistryBlobs, volumeRepository, volumeVersionManifest } from '#tern/volumes';
import { ChunkCache } from '../../apps/agent/src/volumes/chunk-cache.js';
import type { ChunkSource } from '../../apps/agent/src/volumes/chunk-sources.js';
import { uploadChunks } from '../../apps/agent/src/volumes/volume-mounts.js';
import { holdTree, writeTree } from '../../apps/agent/src/volumes/volume-trees.js';
import { signRegistryToken } from '../../apps/gateway/src/registry-tokens/registry-token.js';
import { waitFor } from '../support/processes.js';
import { describeNeeding } from '../support/real-parts.js';

const MiB = 2 ** 20;
const sha256 = (data: Uint8Array) => createHash('sha256').update(data).digest('hex');

/**
 * Volume chunks as blobs of the reference registry under token auth, as `npm run up` runs it:
 * one repository per volume, reached with a token for that repository only (the gateway signs
 * it for a machine a container mounting the volume is placed on); the agent's chunk cache
 * fetching many at once, verifying each as it streams in and sharing chunks by digest.
 */
(await describeNeeding(['root', 'docker-registry', 'openssl']))('volume chunks in the registry', () => {
  let work: string;
  let child: ResultPromise;
  let url: string;
  let key: ReturnType<typeof createPrivateKey>;
  const repoA = volumeRepository('0a0a0a0a-0000-4000-8000-00000000000a', '1a1a1a1a-0000-4000-8000-00000000001a');
  const repoA2 = volumeRepository('0a0a0a0a-0000-4000-8000-00000000000a', '2a2a2a2a-0000-4000-8000-00000000002a');
  const repoB = volumeRepository('0b0b0b0b-0000-4000-8000-00000000000b', '1b1b1b1b-0000-4000-8000-00000000001b');

  /** A store client for `repository` whose token grants `actions` on `granted` (the repository itself unless told). */
  const blobs = (repository: string, actions: string[], granted = repository) =>
    new RegistryBlobs(async () => ({
      url,
      repository,
      token: signRegistryToken({ key, issuer: 'tern', service: 'tern-registry', ttlSeconds: 300 }, 'machine:test', [
        { type: 'repository', name: granted, actions },
      ]).token,
    }));
  const chunkOf = (mib = 1) => randomBytes(mib * MiB);
  /** The blob's bytes as the registry's filesystem driver keeps them. */
  const blobFile = (hex: string) =>
    join(work, 'registry', 'storage', 'docker', 'registry', 'v2', 'blobs', 'sha256', hex.slice(0, 2), hex, 'data');

  let port: number;
  const startRegistry = async () => {
    child = execa('node', ['scripts/lib/registry.mjs', join(work, 'registry'), String(port), 'http://127.0.0.1:9/api/v1/registry/token'], {
      reject: false,
      all: true,
    });
    await waitFor('the registry to answer', async () => (await fetch(`${url}/v2/`).catch(() => undefined))?.status === 401, 30_000);
  };

  beforeAll(async () => {
    work = await mkdtemp(join(tmpdir(), 'tern-volume-store-'));
    port = await freePort();
    url = `http://127.0.0.1:${port}`;
    await startRegistry();
    key = createPrivateKey(await readFile(join(work, 'registry', 'token-key.pem')));
  }, 60_000);

  afterAll(async () => {
    child?.kill('SIGTERM');
    await child;
    if (work) await rm(work, { recursive: true, force: true });
  });

  it("reads and writes one volume's repository with its token only: not another workspace's, not another volume's", async () => {
    const chunk = chunkOf();
    const hex = sha256(chunk);
    expect(await blobs(repoA, ['pull', 'push']).put(hex, chunk)).toBe(true);
    // Already there: nothing sent again.
    expect(await blobs(repoA, ['pull', 'push']).put(hex, chunk)).toBe(false);
    expect(await blobs(repoA, ['pull']).size(hex)).toBe(chunk.length);

    // Another workspace's token (a machine placed with its containers only) reads nothing of A's volume.
    await expect(blobs(repoA, ['pull'], repoB).size(hex)).rejects.toMatchObject({ name: 'BlobStoreError', status: 401 });
    await expect(blobs(repoA, ['pull'], repoB).open(hex)).rejects.toThrow(/answered 401 for blob/);
    // The bytes lie once in the store, but another repository does not hold them: knowing a digest is no key.
    expect(await blobs(repoB, ['pull']).size(hex)).toBeUndefined();
    expect(await blobs(repoA2, ['pull', 'push']).size(hex)).toBeUndefined();
    // A read-only mount's token (pull) writes nothing; nor does a token for another volume.
    const other = chunkOf();
    await expect(blobs(repoA, ['pull']).put(sha256(other), other)).rejects.toThrow(BlobStoreError);
    await expect(blobs(repoA, ['pull', 'push'], repoA2).put(sha256(other), other)).rejects.toMatchObject({ status: 401 });
    expect(await blobs(repoA, ['pull']).size(sha256(other))).toBeUndefined();
    // A blob whose bytes are not its name is refused by the registry itself.
    await expect(blobs(repoA, ['pull', 'push']).put('0'.repeat(64), other)).rejects.toThrow(/answered 400/);
  }, 60_000);

  it('fetches many chunks at once, each verified as it streams into the cache', async () => {
    const chunks = Array.from({ length: 24 }, () => chunkOf());
    const store = blobs(repoA, ['pull', 'push']);
    await inParallel(chunks, 8, (c) => store.put(sha256(c), c));
    const cache = new ChunkCache(join(work, 'cache-parallel'), 1024 * MiB);
    let inFlight = 0;
    let most = 0;
    const reader = blobs(repoA, ['pull']);
    await inParallel(chunks, 16, async (c) => {
      const hex = sha256(c);
      await cache.ensure(
        hex,
        async () => {
          most = Math.max(most, ++inFlight);
          const body = await reader.open(hex);
          // Counted until the body is consumed: the stream is what runs in parallel.
          const [counted, rest] = body.tee();
          new Response(counted).arrayBuffer().then(
            () => inFlight--,
            () => inFlight--,
          );
          return rest;
        },
        'the registry',
      );
    });
    expect(most).toBeGreaterThan(4);
    for (const c of chunks) expect(sha256(await readFile(join(work, 'cache-parallel', sha256(c))))).toBe(sha256(c));
    expect(cache.size).toBe(24 * MiB);
  }, 60_000);

  it('refuses a chunk whose bytes were changed in the store, keeps nothing of it, and takes it once it is whole again', async () => {
    const chunk = chunkOf(2);
    const hex = sha256(chunk);
    await blobs(repoA, ['pull', 'push']).put(hex, chunk);
    const good = await readFile(blobFile(hex));
    const flipped = Buffer.from(good);
    flipped[MiB] ^= 0xff;
    await writeFile(blobFile(hex), flipped);

    const dir = join(work, 'cache-corrupt');
    const cache = new ChunkCache(dir, 1024 * MiB);
    const reader = blobs(repoA, ['pull']);
    await expect(cache.ensure(hex, () => reader.open(hex), 'the volume store (registry)')).rejects.toThrow(
      `volume chunk ${hex} from the volume store (registry) hashes to ${sha256(flipped)}; refusing it`,
    );
    expect(cache.has(hex)).toBe(false);
    // Neither under its name nor half-written beside it.
    expect(readdirSync(dir)).toEqual([]);

    await writeFile(blobFile(hex), good);
    expect(await cache.ensure(hex, () => reader.open(hex), 'the volume store (registry)')).toBe(join(dir, hex));
    expect(sha256(await readFile(join(dir, hex)))).toBe(hex);
  }, 60_000);

  it('shares a cached chunk between volumes and versions by its digest: the second volume downloads nothing', async () => {
    const shared = chunkOf();
    const hex = sha256(shared);
    await blobs(repoA, ['pull', 'push']).put(hex, shared);
    await blobs(repoA2, ['pull', 'push']).put(hex, shared);
    const cache = new ChunkCache(join(work, 'cache-shared'), 1024 * MiB);
    const fetched: string[] = [];
    const via = (repository: string) => async () => {
      fetched.push(repository);
      return blobs(repository, ['pull']).open(hex);
    };
    // Two mounts at once of two volumes holding the chunk: one download between them.
    const [first, second] = await Promise.all([cache.ensure(hex, via(repoA)), cache.ensure(hex, via(repoA2))]);
    expect(first).toBe(second);
    expect(fetched).toEqual([repoA]);
    // A later mount (another version, another volume): none.
    await cache.ensure(hex, via(repoA2));
    expect(fetched).toEqual([repoA]);
    // A cache opened again (an agent restart) keeps it too.
    const reopened = new ChunkCache(join(work, 'cache-shared'), 1024 * MiB);
    await reopened.ensure(hex, via(repoA2));
    expect(fetched).toEqual([repoA]);
  }, 60_000);

  it("uploads a commit's file a few chunks at once, each once, in the file's order", async () => {
    const chunk = VOLUME_CHUNK_BYTES;
    const a = randomBytes(chunk);
    const b = randomBytes(chunk);
    // a, b, a, random, random, a short tail: a repeated chunk and an odd size.
    const file = Buffer.concat([a, b, a, randomBytes(chunk), randomBytes(chunk), randomBytes(1000)]);
    const path = join(work, 'commit.bin');
    await writeFile(path, file);
    const store = blobs(repoA2, ['pull', 'push']);
    let inFlight = 0;
    let most = 0;
    const sent: string[] = [];
    const source: ChunkSource = {
      from: 'the registry',
      parallel: 16,
      uploads: 4,
      fetch: (hex) => store.open(hex),
      upload: async (hex, data) => {
        most = Math.max(most, ++inFlight);
        sent.push(hex);
        try {
          await store.put(hex, data);
        } finally {
          inFlight--;
        }
      },
    };
    const handle = await open(path, 'r');
    const digests = await uploadChunks(source, handle).finally(() => handle.close());
    const expected = [0, 1, 2, 3, 4, 5].map((i) => sha256(file.subarray(i * chunk, Math.min(file.length, (i + 1) * chunk))));
    expect(digests).toEqual(expected);
    expect(sent.sort()).toEqual([...new Set(expected)].sort());
    expect(most).toBeGreaterThan(1);
    expect(most).toBeLessThanOrEqual(4);
    for (const hex of new Set(expected)) {
      expect(sha256(Buffer.from(await new Response(await store.open(hex)).arrayBuffer()))).toBe(hex);
    }
  }, 60_000);

  it("keeps a version's chunks through the registry's garbage collection while its manifest is tagged, and frees them after", async () => {
    const repo = volumeRepository('0c0c0c0c-0000-4000-8000-00000000000c', '1c1c1c1c-0000-4000-8000-00000000001c');
    const store = blobs(repo, ['pull', 'push', 'delete']);
    const kept = chunkOf();
    const dropped = chunkOf();
    for (const c of [kept, dropped]) await store.put(sha256(c), c);
    await store.put(sha256(EMPTY_CONFIG.bytes), EMPTY_CONFIG.bytes);
    // A manifest naming a blob the repository lacks is refused by the registry.
    const absent = sha256(Buffer.from('never pushed'));
    await expect(store.putManifest('v1', volumeVersionManifest(1, new Map([[absent, 12]])))).rejects.toThrow(
      /answered 400 for manifest v1/,
    );
    await store.putManifest('v1', volumeVersionManifest(1, new Map([[sha256(kept), kept.length]])));
    await store.putManifest('v2', volumeVersionManifest(2, new Map([[sha256(dropped), dropped.length]])));
    expect((await store.tags()).sort()).toEqual(['v1', 'v2']);
    await store.deleteManifest('v2');
    expect(await store.tags()).toEqual(['v1']);

    const collect = async () => {
      child.kill('SIGTERM');
      await child;
      await execa('docker-registry', ['garbage-collect', '--delete-untagged', join(work, 'registry', 'config.yml')]);
      await startRegistry();
    };
    await collect();
    expect(existsSync(blobFile(sha256(kept)))).toBe(true);
    expect(existsSync(blobFile(sha256(dropped)))).toBe(false);
    expect(sha256(Buffer.from(await new Response(await store.open(sha256(kept))).arrayBuffer()))).toBe(sha256(kept));

    // The volume deleted (its manifests gone): the next collection frees its bytes.
    await store.deleteManifest('v1');
    await collect();
    expect(existsSync(blobFile(sha256(kept)))).toBe(false);
  }, 120_000);

  /** A mount's source reading `repository` over the agent's client (node:http), counting the blobs it was given. */
  const registrySource = (repository: string, read = blobs(repository, ['pull'])) => {
    const source = {
      from: 'the volume store (registry)',
      parallel: 4,
      uploads: 4,
      fetched: 0,
      fetch: async (hex: string) => {
        const bytes = await read.read(hex, VOLUME_CHUNK_BYTES);
        source.fetched++;
        return bytes;
      },
      upload: () => Promise.reject(new Error('a mount uploads nothing')),
    };
    return source;
  };
  /** A volume of one file of `chunks` whole chunks and a short tail, pushed to `repository`. */
  const pushedVolume = async (repository: string, chunks: number) => {
    const parts = [...Array.from({ length: chunks }, () => randomBytes(VOLUME_CHUNK_BYTES)), randomBytes(1000)];
    await inParallel(parts, 4, (c) => blobs(repository, ['pull', 'push']).put(sha256(c), c));
    const file = { path: 'llm/weights.bin', size: chunks * VOLUME_CHUNK_BYTES + 1000, mode: 0o644, mtime: new Date().toISOString() };
    const manifest: VolumeManifest = { volume: 'weights', version: 1, store: 'registry', files: [{ ...file, chunks: parts.map(sha256) }] };
    return { manifest, bytes: Buffer.concat(parts) };
  };

  it('writes a tree straight from the fetched chunks, each verified, into the cache and the file', async () => {
    const repo = volumeRepository('0d0d0d0d-0000-4000-8000-00000000000d', '1d1d1d1d-0000-4000-8000-00000000001d');
    const { manifest, bytes } = await pushedVolume(repo, 6);
    const cache = new ChunkCache(join(work, 'cache-tree'), 1024 * MiB);
    const source = registrySource(repo);
    await writeTree(manifest, join(work, 'tree-1'), cache, source);
    expect(sha256(await readFile(join(work, 'tree-1', 'llm', 'weights.bin')))).toBe(sha256(bytes));
    expect(source.fetched).toBe(7);
    expect(readdirSync(join(work, 'cache-tree')).sort()).toEqual(manifest.files[0]!.chunks.slice().sort());
    // Another tree of the same chunks (another version, another volume) comes from the cache alone.
    const again = registrySource(repo);
    await writeTree(manifest, join(work, 'tree-2'), cache, again);
    expect(again.fetched).toBe(0);
    expect(sha256(await readFile(join(work, 'tree-2', 'llm', 'weights.bin')))).toBe(sha256(bytes));
  }, 120_000);

  it("writes a read-only tree's chunks once, into the tree, and copies them from it, verified, for the next tree", async () => {
    const repo = volumeRepository('0c0c0c0c-0000-4000-8000-00000000000c', '1c1c1c1c-0000-4000-8000-00000000001c');
    const { manifest, bytes } = await pushedVolume(repo, 3);
    const cache = new ChunkCache(join(work, 'cache-ro'), 1024 * MiB);
    const source = registrySource(repo);
    const tree = join(work, 'tree-ro');
    await writeTree(manifest, tree, cache, source, true);
    expect(sha256(await readFile(join(tree, 'llm', 'weights.bin')))).toBe(sha256(bytes));
    expect(source.fetched).toBe(4);
    expect(readdirSync(join(work, 'cache-ro'))).toEqual([]);
    holdTree(manifest, tree, cache);

    // The next version (one chunk of it changed under the tree since): the others come from the tree, the changed one from the store.
    const handle = await open(join(tree, 'llm', 'weights.bin'), 'r+');
    await handle.write(Buffer.from('changed'), 0, 7, VOLUME_CHUNK_BYTES + 10);
    await handle.close();
    const next = registrySource(repo);
    await writeTree({ ...manifest, version: 2 }, join(work, 'tree-ro-2'), cache, next);
    expect(sha256(await readFile(join(work, 'tree-ro-2', 'llm', 'weights.bin')))).toBe(sha256(bytes));
    expect(next.fetched).toBe(1);

    // The tree removed: its chunks come from the cache (the read-write tree above kept the one it fetched) or the store.
    cache.forgetTree(tree);
    const after = registrySource(repo);
    await writeTree({ ...manifest, version: 3 }, join(work, 'tree-ro-3'), cache, after, true);
    expect(after.fetched).toBe(3);
  }, 120_000);

  it('fails a mount whose store stops midway naming the store, keeps no partial chunk, and mounts once it is back', async () => {
    const repo = volumeRepository('0e0e0e0e-0000-4000-8000-00000000000e', '1e1e1e1e-0000-4000-8000-00000000001e');
    const { manifest, bytes } = await pushedVolume(repo, 12);
    const cache = new ChunkCache(join(work, 'cache-stop'), 1024 * MiB);
    const source = registrySource(repo);
    const fetchOne = source.fetch;
    let stopped: Promise<unknown> | undefined;
    source.fetch = async (hex) => {
      // The store goes away after a few chunks, with others in flight.
      if (source.fetched >= 3 && !stopped) {
        // The registry itself (its wrapper exits with it), killed as a crash would.
        // pkill, not pgrep then kill: no window between finding it and signalling it.
        await execa('pkill', ['-KILL', '-P', String(child.pid), '-x', 'docker-registry'], { reject: false });
        stopped = child;
      }
      return fetchOne(hex);
    };
    await expect(writeTree(manifest, join(work, 'tree-stop'), cache, source)).rejects.toThrow(
      new RegExp(`from the volume store ${url.replace(/[.:/]/g, '\\$&')}: (ECONNREFUSED|ECONNRESET|cut off)`),
    );
    await stopped;
    const kept = readdirSync(join(work, 'cache-stop'));
    expect(kept.filter((name) => !manifest.files[0]!.chunks.includes(name))).toEqual([]);
    for (const hex of kept) expect(sha256(await readFile(join(work, 'cache-stop', hex)))).toBe(hex);

    await startRegistry();
    await writeTree(manifest, join(work, 'tree-back'), cache, registrySource(repo));
    expect(sha256(await readFile(join(work, 'tree-back', 'llm', 'weights.bin')))).toBe(sha256(bytes));
  }, 120_000);

  it("fails clearly when the cache's disk fills, and keeps no truncated chunk", async () => {
    const repo = volumeRepository('0f0f0f0f-0000-4000-8000-00000000000f', '1f1f1f1f-0000-4000-8000-00000000001f');
    const { manifest } = await pushedVolume(repo, 4);
    // A disk of two and a half chunks for the cache.
    const small = join(work, 'small-disk');
    mkdirSync(small);
    await execa('mount', ['-t', 'tmpfs', '-o', `size=${Math.round(2.5 * VOLUME_CHUNK_BYTES)}`, 'tern-test-cache', small]);
    try {
      const cache = new ChunkCache(join(small, 'chunks'), 1024 * MiB);
      await expect(writeTree(manifest, join(work, 'tree-full'), cache, registrySource(repo))).rejects.toThrow(
        new RegExp(`volume chunk [0-9a-f]{64} from the volume store \\(registry\\) could not be kept in ${join(small, 'chunks')}: ENOSPC`),
      );
      const kept = readdirSync(join(small, 'chunks'));
      expect(kept.length).toBeLessThan(manifest.files[0]!.chunks.length);
      for (const hex of kept) expect(sha256(await readFile(join(small, 'chunks', hex)))).toBe(hex);
    } finally {
      await execa('umount', [small]);
    }
  }, 120_000);
});
