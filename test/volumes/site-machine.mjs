// One machine of a site in test/volumes/site-cache.test.ts, run inside the site's network
// namespace: mounts a volume's tree with the agent's own code (its chunk cache, writeTree, the
// store client with or without the site cache) and prints how long it took, as JSON.
// Environment: STORE, SITE_CACHE (optional), REPOSITORY, TOKEN, MANIFEST (a file), DIR.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { VOLUME_CHUNK_BYTES } from '#tern/contracts';
import { RegistryBlobs } from '#tern/volumes';
import { ChunkCache } from '../../dist/apps/agent/src/volumes/chunk-cache.js';
import { writeTree } from '../../dist/apps/agent/src/volumes/volume-trees.js';

const { STORE, SITE_CACHE, REPOSITORY, TOKEN, MANIFEST, DIR } = process.env;
const fellBack = [];
const blobs = new RegistryBlobs(
  async () => ({ url: STORE, repository: REPOSITORY, token: TOKEN }),
  120_000,
  SITE_CACHE ? { url: SITE_CACHE, unreachable: (message) => fellBack.push(message) } : undefined,
);
const source = {
  from: SITE_CACHE ? `the store through ${SITE_CACHE}` : 'the store',
  parallel: 16,
  uploads: 1,
  fetch: (hex) => blobs.read(hex, VOLUME_CHUNK_BYTES),
  upload: () => Promise.reject(new Error('a mount uploads nothing')),
};
const began = Date.now();
await writeTree(JSON.parse(readFileSync(MANIFEST, 'utf8')), join(DIR, 'tree'), new ChunkCache(join(DIR, 'chunks'), 2 ** 31), source);
process.stdout.write(`${JSON.stringify({ ms: Date.now() - began, fellBack })}\n`);
