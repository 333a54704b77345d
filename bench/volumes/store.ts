/**
 * What the benches that move volume and image bytes share (bench/volumes, bench/model-start): a
 * volume of random bytes put through the API, the stack's registry and the operator's tokens for
 * it, and the floor: a bare parallel GET of blobs from that registry into files.
 */
import { createHash, randomBytes } from 'node:crypto';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { REGISTRY_TOKEN_PATH, VOLUME_CHUNK_BYTES } from '#tern/contracts';
import { getInto, inParallel } from '#tern/volumes';
import type { Stack } from '../invoke/stack.js';

/**
 * Creates volume `name` and puts one file `path` of `mib` MiB of random bytes into it through the
 * API (the gateway cuts it into chunks); the sha256 of each chunk, in order, for the floor's GETs.
 */
export async function putRandomVolume(stack: Stack, name: string, path: string, mib: number): Promise<string[]> {
  const digests: string[] = [];
  const created = await fetch(`${stack.gateway}/api/v1/volumes`, {
    method: 'POST',
    headers: { authorization: `Bearer ${stack.token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ name }),
  });
  if (!created.ok) throw new Error(`create volume ${name}: ${created.status} ${await created.text()}`);
  const res = await fetch(`${stack.gateway}/api/v1/volumes/${name}/files?path=${encodeURIComponent(path)}`, {
    method: 'PUT',
    headers: {
      authorization: `Bearer ${stack.token}`,
      'content-type': 'application/octet-stream',
      'content-length': String(mib * 2 ** 20),
    },
    body: randomStream(mib, digests),
    duplex: 'half',
  } as RequestInit);
  if (!res.ok) throw new Error(`put ${path} into ${name}: ${res.status} ${await res.text()}`);
  return digests;
}

/** N MiB of random bytes, made as they are sent (no chunk repeats, so none dedups); records each chunk's digest in `digests`. */
function randomStream(mib: number, digests: string[]): ReadableStream<Uint8Array> {
  let sent = 0;
  const perChunk = VOLUME_CHUNK_BYTES / 2 ** 20;
  let hash = createHash('sha256');
  return new ReadableStream({
    pull(controller) {
      if (sent >= mib) {
        if (sent % perChunk) digests.push(hash.digest('hex'));
        return controller.close();
      }
      const piece = randomBytes(2 ** 20);
      hash.update(piece);
      if (++sent % perChunk === 0) {
        digests.push(hash.digest('hex'));
        hash = createHash('sha256');
      }
      controller.enqueue(piece);
    },
  });
}

/** A registry token of the stack's operator (its API token as the Basic-auth password) for `scope`. */
export async function registryToken(stack: Stack, scope: string): Promise<string> {
  const res = await fetch(`${stack.gateway}${REGISTRY_TOKEN_PATH}?service=tern-registry&scope=${encodeURIComponent(scope)}`, {
    headers: { authorization: `Basic ${Buffer.from(`bench:${stack.token}`).toString('base64')}` },
  });
  if (!res.ok) throw new Error(`registry token: ${res.status} ${await res.text()}`);
  return ((await res.json()) as { token: string }).token;
}

/** The registry `npm run up` started for the stack (run.json), or BENCH_REGISTRY_URL for an existing stack's. */
export async function registryUrl(stack: Stack): Promise<string> {
  if (process.env.BENCH_REGISTRY_URL) return process.env.BENCH_REGISTRY_URL.replace(/\/+$/, '');
  const run = JSON.parse(await readFile(join(stack.ternHome, 'run.json'), 'utf8')) as { registry?: { url?: string } };
  if (!run.registry?.url)
    throw new Error(`the stack runs no private registry (${join(stack.ternHome, 'run.json')}): set BENCH_REGISTRY_URL`);
  return run.registry.url.replace(/\/+$/, '');
}

/** The repository of the stack's one volume, from the registry's catalog. */
export async function volumeRepositoryOf(stack: Stack): Promise<string> {
  const catalogToken = await registryToken(stack, 'registry:catalog:*');
  const catalog = (await (
    await fetch(`${await registryUrl(stack)}/v2/_catalog?n=1000`, { headers: { authorization: `Bearer ${catalogToken}` } })
  ).json()) as { repositories: string[] };
  const repository = catalog.repositories.find((r) => r.startsWith('volumes/'));
  if (!repository) throw new Error(`no volumes/ repository in the registry's catalog: ${catalog.repositories.join(', ')}`);
  return repository;
}

/** Blobs of one repository, by sha256 hex, each at most `maxBytes`. */
export interface BlobSet {
  repository: string;
  digests: string[];
  maxBytes: number;
}

/**
 * The floor: every blob fetched with bare HTTP GETs from the registry the agent fetches from, 16
 * at once (as the agent fetches chunks), over the agent's client (`getInto`: kept-alive
 * connections, each blob read into one new buffer and written to its own file under `dir` with
 * one call): no hashing, no cache, no tree. Seconds and bytes.
 */
export async function bareGets(stack: Stack, sets: BlobSet[], dir: string): Promise<{ seconds: number; bytes: number }> {
  const base = await registryUrl(stack);
  const jobs: { url: string; authorization: string; hex: string; maxBytes: number }[] = [];
  for (const set of sets) {
    const authorization = `Bearer ${await registryToken(stack, `repository:${set.repository}:pull`)}`;
    for (const hex of set.digests)
      jobs.push({ url: `${base}/v2/${set.repository}/blobs/sha256:${hex}`, authorization, hex, maxBytes: set.maxBytes });
  }
  await mkdir(dir, { recursive: true });
  let bytes = 0;
  const t0 = performance.now();
  await inParallel(jobs, 16, async (job) => {
    const got = await getInto(job.url, { authorization: job.authorization }, job.maxBytes, 120_000);
    if (!('bytes' in got)) throw new Error(`GET blob ${job.hex}: ${got.status} ${got.text}`);
    await writeFile(join(dir, job.hex), got.bytes);
    bytes += got.bytes.length;
  });
  return { seconds: (performance.now() - t0) / 1000, bytes };
}
