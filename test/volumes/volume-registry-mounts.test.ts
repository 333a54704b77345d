import { createHash, createPrivateKey } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readdirSync } from 'node:fs';
import { readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execa, type ResultPromise } from 'execa';
import { jetstreamManager } from '@nats-io/jetstream';
import { Objm } from '@nats-io/obj';
import { REGISTRY_TOKEN_PATH, VOLUME_CHUNK_BYTES, VOLUME_CHUNKS_BUCKET, type VolumeBlobGrant } from '#tern/contracts';
import { freePort } from '#tern/runtime';
import { RegistryBlobs } from '#tern/volumes';
import { makeTokenKey } from '../../scripts/lib/registry.mjs';
import { signRegistryToken } from '../../apps/gateway/src/registry-tokens/registry-token.js';
import { ADMIN } from '../agent/harness.js';
import { runningGateway } from '../support/gateway.js';
import { waitFor } from '../support/processes.js';
import { describeNeeding } from '../support/real-parts.js';
import { mountHarness } from './mount-harness.js';

const sha256 = (data: Uint8Array) => createHash('sha256').update(data).digest('hex');

/** The registry's dir, port and token key, made before the gateway (which reads the key at boot) starts. */
const registryDir = mkdtempSync(join(tmpdir(), 'tern-volume-registry-'));
mkdirSync(join(registryDir, 'registry'));
const registryPort = await freePort();
makeTokenKey(join(registryDir, 'registry', 'token-key.pem'), join(registryDir, 'registry', 'token-cert.pem'));

/**
 * Volumes whose chunks live in the registry, as `npm run up` runs it (token auth, the gateway the
 * token service): agents fetch a volume's chunks straight from its repository and push a commit's
 * there, with a token the gateway grants for that one repository to a machine a container mounting
 * it is placed on; nothing of the chunks passes through the gateway on a mount or a commit.
 */
(await describeNeeding(['root', 'runc', 'python3', 'docker-registry', 'openssl']))('volumes in the registry mounted by agents', () => {
  let registry: ResultPromise;
  const url = `http://127.0.0.1:${registryPort}`;
  beforeAll(async () => {
    registry = execa(
      'node',
      ['scripts/lib/registry.mjs', join(registryDir, 'registry'), String(registryPort), 'http://127.0.0.1:9/api/v1/registry/token'],
      { reject: false, all: true },
    );
    await waitFor('the registry to answer', async () => (await fetch(`${url}/v2/`).catch(() => undefined))?.status === 401, 30_000);
  }, 60_000);
  const gateway = runningGateway('volreg', ADMIN, {
    REGISTRY_URL: url,
    REGISTRY_TOKEN_KEY_FILE: join(registryDir, 'registry', 'token-key.pem'),
  });
  const machineOf = { A: 'volreg-machine-a', B: 'volreg-machine-b' };
  const h = mountHarness(gateway, machineOf);
  const { agents, call, kinds, linesOf, deploy, start, fileOf, firstChunkOf } = h;
  const model = Buffer.alloc(2 * VOLUME_CHUNK_BYTES + 1000, 'weights');

  const volumeId = async (name: string) => ((await h.db.query(`SELECT id FROM volumes WHERE name = $1`, [name])) as { id: string }[])[0].id;
  /** The blob's bytes as the registry's filesystem driver keeps them. */
  const blobFile = (hex: string) =>
    join(registryDir, 'registry', 'storage', 'docker', 'registry', 'v2', 'blobs', 'sha256', hex.slice(0, 2), hex, 'data');
  /** Whether the volume's repository links the blob. */
  const linked = async (volume: string, hex: string) =>
    existsSync(
      join(
        registryDir,
        'registry',
        'storage',
        'docker',
        'registry',
        'v2',
        'repositories',
        'volumes',
        h.workspaceId,
        await volumeId(volume),
        '_layers',
        'sha256',
        hex,
      ),
    );
  /** The volume's version manifests in the registry: tag → the chunk digests it names. */
  const versionsOf = async (name: string, id?: string) => {
    const repository = `volumes/${h.workspaceId}/${id ?? (await volumeId(name))}`;
    const key = createPrivateKey(await readFile(join(registryDir, 'registry', 'token-key.pem')));
    const signer = { key, issuer: 'tern', service: 'tern-registry', ttlSeconds: 60 };
    const token = signRegistryToken(signer, 'test', [{ type: 'repository', name: repository, actions: ['pull'] }]).token;
    const out: Record<string, string[]> = {};
    for (const tag of await new RegistryBlobs(async () => ({ url, repository, token })).tags()) {
      const res = await fetch(`${url}/v2/${repository}/manifests/${tag}`, {
        headers: { accept: 'application/vnd.oci.image.manifest.v1+json', authorization: `Bearer ${token}` },
      });
      out[tag] = ((await res.json()) as { layers: { digest: string }[] }).layers.map((l) => l.digest.slice('sha256:'.length)).sort();
    }
    return out;
  };
  const grantOf = (m: 'A' | 'B', container: string, volume: string) =>
    fetch(`${gateway.base}/api/v1/agent/containers/${container}/volumes/${volume}/grant`, {
      headers: { authorization: `Bearer ${agents[m].configFile().token}` },
    });

  beforeAll(async () => {
    for (const v of ['data', 'models', 'fragile']) expect((await call('POST', '/api/v1/volumes', ADMIN, { name: v })).status).toBe(201);
    for (const v of ['models', 'fragile']) {
      const put = await fetch(`${gateway.base}/api/v1/volumes/${v}/files?path=llm/model.bin`, {
        method: 'PUT',
        headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/octet-stream' },
        body: v === 'models' ? model : Buffer.alloc(VOLUME_CHUNK_BYTES + 10, 'fragile'),
      });
      expect(put.status).toBe(200);
    }
    await deploy('writer', [{ name: 'data', mount_path: '/data' }]);
    await deploy('reader', [{ name: 'models', mount_path: '/models', read_only: true }]);
    await deploy('fragile-reader', [{ name: 'fragile', mount_path: '/fragile', read_only: true }]);
  }, 300_000);

  afterAll(async () => {
    registry?.kill('SIGTERM');
    await registry;
    await rm(registryDir, { recursive: true, force: true });
  });

  it("keeps a put file's chunks as blobs of the volume's repository and mounts them from there", async () => {
    const hex = await firstChunkOf('models', 'llm/model.bin');
    expect(await linked('models', hex)).toBe(true);
    expect(await linked('data', hex)).toBe(false);
    expect((await call('GET', '/api/v1/volumes/models', ADMIN)).body).toMatchObject({ version: 1 });
    // The version is an OCI artifact manifest naming each of its chunks once: what keeps them through a garbage collection.
    const [row] = (await h.db.query(`SELECT chunks FROM volume_files f JOIN volumes v ON v.id = f.volume_id WHERE v.name = 'models'`)) as {
      chunks: string[];
    }[];
    expect(await versionsOf('models')).toEqual({ v1: [...new Set(row.chunks)].sort() });

    await start('A', 'c-a-ro', 'reader', [{ volume: 'models', mountPath: '/models', readOnly: true }], {
      HASH: '/models/llm/model.bin',
      LIFETIME: '1',
    });
    await waitFor('c-a-ro stopped', async () => kinds('c-a-ro').includes('stopped'), 90_000);
    expect(linesOf('c-a-ro')).toContain(`sha256 /models/llm/model.bin: ${sha256(model)}`);
    // A read-only mount's chunks are written once, into its tree, which the cache reads them from.
    expect(readdirSync(join(agents.A.stateDir, 'volumes', 'chunks'))).not.toContain(hex);
    // No chunk went into (or through) the NATS object store: its bucket was never even made.
    const jsm = await jetstreamManager(h.messaging.nc);
    const streams: string[] = [];
    for await (const name of jsm.streams.names()) streams.push(name);
    expect(streams).not.toContain(`OBJ_${h.messaging.ns.bucket(VOLUME_CHUNKS_BUCKET.name)}`);
    expect(streams.length).toBeGreaterThan(0);
  }, 240_000);

  it("commits a read-write mount's files by pushing them to the volume's repository; the API reads them back", async () => {
    await start('A', 'c-a-rw', 'writer', [{ volume: 'data', mountPath: '/data', readOnly: false }], {
      WRITE: '/data/from-a.txt=bytes pushed by machine A',
      LIFETIME: '1',
    });
    await waitFor('c-a-rw stopped', async () => kinds('c-a-rw').includes('stopped'), 90_000);
    expect(String(await fileOf('data', 'from-a.txt'))).toBe('bytes pushed by machine A');
    expect(await linked('data', sha256(Buffer.from('bytes pushed by machine A')))).toBe(true);
    // The commit made version 1 of data, and its manifest.
    expect(await versionsOf('data')).toEqual({ v1: [sha256(Buffer.from('bytes pushed by machine A'))] });
  }, 240_000);

  it('grants a machine a token for the volumes of containers placed on it only, pull-only for a read-only mount', async () => {
    await start('B', 'c-b-ro', 'reader', [{ volume: 'models', mountPath: '/models', readOnly: true }], { LIFETIME: '600' });
    await start('B', 'c-b-rw', 'writer', [{ volume: 'data', mountPath: '/data', readOnly: false }], { LIFETIME: '600' });
    await waitFor('c-b-ro and c-b-rw ready', async () => kinds('c-b-ro').includes('ready') && kinds('c-b-rw').includes('ready'), 90_000);
    const hex = await firstChunkOf('models', 'llm/model.bin');

    const ro = await grantOf('B', 'c-b-ro', 'models');
    expect(ro.status).toBe(200);
    const grant = (await ro.json()) as VolumeBlobGrant;
    const workspaceId = h.workspaceId;
    expect(grant.repository).toBe(`volumes/${workspaceId}/${await volumeId('models')}`);
    const claims = JSON.parse(Buffer.from(grant.token.split('.')[1]!, 'base64url').toString()) as { sub: string; access: unknown };
    expect(claims).toMatchObject({
      sub: `machine:${machineOf.B}`,
      access: [{ type: 'repository', name: grant.repository, actions: ['pull'] }],
    });
    const reads = new RegistryBlobs(async () => grant);
    expect(await reads.size(hex)).toBe(VOLUME_CHUNK_BYTES);
    // Pull-only: the registry takes no blob from it.
    const extra = Buffer.from('not for a read-only mount');
    await expect(reads.put(sha256(extra), extra)).rejects.toMatchObject({ status: 401 });
    // Its token opens no other volume's repository.
    const elsewhere = new RegistryBlobs(async () => ({ ...grant, repository: `volumes/${workspaceId}/${await volumeId('data')}` }));
    await expect(elsewhere.size(sha256(Buffer.from('bytes pushed by machine A')))).rejects.toMatchObject({ status: 401 });

    // Machine A has no container there; a volume the container does not mount; an API token: refused.
    expect((await grantOf('A', 'c-b-ro', 'models')).status).toBe(404);
    // Nor does A get there through the token service: its token names nothing, the registry refuses the blob.
    const asked = await fetch(
      `${gateway.base}${REGISTRY_TOKEN_PATH}?service=tern-registry&scope=${encodeURIComponent(`repository:${grant.repository}:pull`)}`,
      { headers: { authorization: `Basic ${Buffer.from(`machine:${agents.A.configFile().token}`).toString('base64')}` } },
    );
    expect(asked.status).toBe(200);
    const unplaced = ((await asked.json()) as { token: string }).token;
    const refused = await fetch(`${url}/v2/${grant.repository}/blobs/sha256:${hex}`, { headers: { authorization: `Bearer ${unplaced}` } });
    expect([401, 403]).toContain(refused.status);
    expect((await grantOf('B', 'c-b-ro', 'data')).status).toBe(404);
    expect(
      (
        await fetch(`${gateway.base}/api/v1/agent/containers/c-b-ro/volumes/models/grant`, {
          headers: { authorization: `Bearer ${ADMIN}` },
        })
      ).status,
    ).toBe(401);

    // A read-write mount's token pushes, to its own volume's repository only.
    const rw = (await (await grantOf('B', 'c-b-rw', 'data')).json()) as VolumeBlobGrant;
    expect(JSON.parse(Buffer.from(rw.token.split('.')[1]!, 'base64url').toString())).toMatchObject({
      access: [{ name: rw.repository, actions: ['pull', 'push'] }],
    });
    const pushed = Buffer.from('pushed by B, not committed');
    expect(await new RegistryBlobs(async () => rw).put(sha256(pushed), pushed)).toBe(true);
    // A commit names only chunks the volume's repository holds: the models chunk is not in data's.
    const commit = (writes: unknown[]) =>
      fetch(`${gateway.base}/api/v1/agent/containers/c-b-rw/volumes/data/commit`, {
        method: 'POST',
        headers: { authorization: `Bearer ${agents.B.configFile().token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ baseVersion: 1, writes, removals: [] }),
      });
    const foreign = await commit([{ path: 'stolen.bin', mode: 0o644, mtime: new Date().toISOString(), chunks: [hex] }]);
    expect(foreign.status).toBe(400);
    expect(JSON.stringify(await foreign.json())).toContain(`chunk ${hex} is not in the volume's repository of the registry`);
    const own = await commit([{ path: 'pushed.txt', mode: 0o644, mtime: new Date().toISOString(), chunks: [sha256(pushed)] }]);
    expect(own.status).toBe(201);
    expect(String(await fileOf('data', 'pushed.txt'))).toBe('pushed by B, not committed');
    // Only the newest version's manifest stays.
    expect(await versionsOf('data')).toEqual({ v2: [sha256(Buffer.from('bytes pushed by machine A')), sha256(pushed)].sort() });
  }, 240_000);

  it('refuses a chunk whose bytes were changed in the store: the start fails saying so, nothing is kept, the next start succeeds', async () => {
    const hex = await firstChunkOf('fragile', 'llm/model.bin');
    const good = await readFile(blobFile(hex));
    const flipped = Buffer.from(good);
    flipped[1000] ^= 0xff;
    await writeFile(blobFile(hex), flipped);
    const ro = [{ volume: 'fragile', mountPath: '/fragile', readOnly: true }];
    await start('A', 'c-a-bad', 'fragile-reader', ro, { READ: '/fragile/llm/model.bin', LIFETIME: '1' });
    await waitFor('c-a-bad failed', async () => kinds('c-a-bad').includes('failed'), 90_000);
    const failed = h.events.find((e) => e.data.containerId === 'c-a-bad' && e.kind === 'failed')!;
    expect(String(failed.data.error)).toContain(
      `volume chunk ${hex} from the volume store (registry) hashes to ${sha256(flipped)}; refusing it`,
    );
    expect(linesOf('c-a-bad')).toEqual([]);
    const chunks = readdirSync(join(agents.A.stateDir, 'volumes', 'chunks'));
    expect(chunks.filter((f) => f.includes(hex))).toEqual([]);
    expect(readdirSync(join(agents.A.stateDir, 'volumes', 'ro', h.workspaceId)).filter((d) => d.startsWith('fragile'))).toEqual([]);

    await writeFile(blobFile(hex), good);
    await start('A', 'c-a-good', 'fragile-reader', ro, { READ: '/fragile/llm/model.bin', LIFETIME: '1' });
    await waitFor('c-a-good stopped', async () => kinds('c-a-good').includes('stopped'), 90_000);
    expect(linesOf('c-a-good')).toContain(`read /fragile/llm/model.bin: ${'fragile'.repeat(10).slice(0, 64)}`);
  }, 240_000);

  it("deletes a volume's version manifests with it, so the registry's garbage collection frees its bytes", async () => {
    const id = await volumeId('fragile');
    expect(Object.keys(await versionsOf('fragile', id))).toEqual(['v1']);
    expect((await call('DELETE', '/api/v1/volumes/fragile', ADMIN)).status).toBe(204);
    expect(await versionsOf('fragile', id)).toEqual({});
  }, 60_000);

  it('mounts a volume written by the object-store layout: its chunks move to the registry at its first mount', async () => {
    // As a gateway before this change left it: the chunk in the volume-chunks object store, the manifest in Postgres.
    expect((await call('POST', '/api/v1/volumes', ADMIN, { name: 'legacy' })).status).toBe(201);
    const bytes = Buffer.alloc(VOLUME_CHUNK_BYTES + 500, 'old layout');
    const chunks = [bytes.subarray(0, VOLUME_CHUNK_BYTES), bytes.subarray(VOLUME_CHUNK_BYTES)];
    const store = await new Objm(h.messaging.nc).create(h.messaging.ns.bucket(VOLUME_CHUNKS_BUCKET.name));
    for (const c of chunks) {
      await store.putBlob({ name: `${h.workspaceId}.${sha256(c)}` }, c);
      await h.db.query(`INSERT INTO volume_chunks (workspace_id, digest, size) VALUES ($1, $2, $3)`, [h.workspaceId, sha256(c), c.length]);
    }
    const id = await volumeId('legacy');
    await h.db.query(
      `INSERT INTO volume_files (volume_id, path, size, mode, mtime, chunks, version) VALUES ($1, 'weights.bin', $2, 420, now(), $3, 1)`,
      [id, bytes.length, chunks.map(sha256)],
    );
    await h.db.query(`UPDATE volumes SET version = 1 WHERE id = $1`, [id]);
    expect(await versionsOf('legacy')).toEqual({});

    await deploy('legacy-reader', [{ name: 'legacy', mount_path: '/legacy', read_only: true }]);
    await start('B', 'c-b-legacy', 'legacy-reader', [{ volume: 'legacy', mountPath: '/legacy', readOnly: true }], {
      HASH: '/legacy/weights.bin',
      LIFETIME: '1',
    });
    await waitFor('c-b-legacy stopped', async () => kinds('c-b-legacy').includes('stopped'), 90_000);
    expect(linesOf('c-b-legacy')).toContain(`sha256 /legacy/weights.bin: ${sha256(bytes)}`);
    expect(await versionsOf('legacy')).toEqual({ v1: chunks.map(sha256).sort() });
    for (const c of chunks) expect(await linked('legacy', sha256(c))).toBe(true);
    expect(Buffer.compare((await fileOf('legacy', 'weights.bin')) as Buffer, bytes)).toBe(0);
  }, 240_000);
});
