import { createPrivateKey } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execa, type ResultPromise } from 'execa';
import pg from 'pg';
import { TernClient, TernNotFoundError } from '#tern/client';
import { freePort, skopeoCopy } from '#tern/runtime';
import { signRegistryToken } from '../../apps/gateway/src/registry-tokens/registry-token.js';
import { makeTokenKey } from '../../scripts/lib/registry.mjs';
import { runningGateway } from '../support/gateway.js';
import { waitFor } from '../support/processes.js';
import { deleteTwiceInPython } from '../support/python-sdk.js';
import { describeNeeding } from '../support/real-parts.js';

const OPERATOR = `tern_${'i'.repeat(43)}`;

/** The registry's dir, port and token key, made before the gateway (which reads the key at boot) starts. */
const work = mkdtempSync(join(tmpdir(), 'tern-image-deletes-'));
mkdirSync(join(work, 'registry'));
const port = await freePort();
const host = `127.0.0.1:${port}`;
makeTokenKey(join(work, 'registry', 'token-key.pem'), join(work, 'registry', 'token-cert.pem'));

/**
 * DELETE /api/v1/images?ref= against the reference registry under token auth, as `npm run up`
 * runs it, and the registry step of DELETE /api/v1/workspaces/:id: a workspace's admin deletes its
 * own builds only, an image in use is refused naming its user, the operator deletes any.
 */
(await describeNeeding(['umoci', 'skopeo', 'docker-registry', 'openssl']))('deleting images from the registry', () => {
  let registry: ResultPromise;
  beforeAll(async () => {
    registry = execa(
      'node',
      ['scripts/lib/registry.mjs', join(work, 'registry'), String(port), 'http://127.0.0.1:9/api/v1/registry/token'],
      {
        reject: false,
        all: true,
      },
    );
    await waitFor('the registry to answer', async () => (await fetch(`http://${host}/v2/`).catch(() => undefined))?.status === 401, 30_000);
    // A tiny image (an empty root filesystem) to push under every name the tests need.
    await execa('umoci', ['init', '--layout', join(work, 'layout')]);
    await execa('umoci', ['new', '--image', `${join(work, 'layout')}:tiny`]);
  }, 60_000);
  const gateway = runningGateway('imgdel', OPERATOR, {
    REGISTRY_URL: `http://${host}`,
    REGISTRY_TOKEN_KEY_FILE: join(work, 'registry', 'token-key.pem'),
  });
  afterAll(async () => {
    registry?.kill('SIGTERM');
    await registry;
    rmSync(work, { recursive: true, force: true });
  });

  /** The test's own token for a repository (the registry trusts the key the gateway signs with). */
  const token = (repository: string) =>
    signRegistryToken(
      {
        key: createPrivateKey(readFileSync(join(work, 'registry', 'token-key.pem'))),
        issuer: 'tern',
        service: 'tern-registry',
        ttlSeconds: 300,
      },
      'test',
      [{ type: 'repository', name: repository, actions: ['pull', 'push'] }],
    ).token;
  const push = (repository: string, tag: string) =>
    skopeoCopy(repository, `oci:${join(work, 'layout')}:tiny`, `docker://${host}/${repository}:${tag}`, [
      { host, insecure: true, token: token(repository) },
    ]);
  const tags = async (repository: string): Promise<string[]> => {
    const res = await fetch(`http://${host}/v2/${repository}/tags/list`, { headers: { authorization: `Bearer ${token(repository)}` } });
    return res.status === 404 ? [] : (((await res.json()) as { tags: string[] | null }).tags ?? []);
  };
  const call = async (method: string, path: string, bearer: string, body?: unknown) => {
    const res = await fetch(`${gateway.base}${path}`, {
      method,
      headers: { authorization: `Bearer ${bearer}`, ...(body ? { 'content-type': 'application/json' } : {}) },
      body: body ? JSON.stringify(body) : undefined,
      signal: AbortSignal.timeout(30_000),
    });
    const text = await res.text();
    return { status: res.status, body: text ? (JSON.parse(text) as any) : undefined };
  };
  const remove = (ref: string, bearer: string) => call('DELETE', `/api/v1/images?ref=${encodeURIComponent(ref)}`, bearer);
  const workspace = async (name: string) => {
    const made = (await call('POST', '/api/v1/workspaces', OPERATOR, { name })).body;
    const member = (await call('POST', '/api/v1/tokens', made.token, { name: 'member' })).body.token as string;
    return { id: made.workspace.id as string, admin: made.token as string, member };
  };

  it("lets a workspace's admin delete its own builds, every tag of the manifest with it, and nobody else's", async () => {
    const a = await workspace('img-a');
    const b = await workspace('img-b');
    const repo = `builds/${a.id}/app`;
    const digest = await push(repo, '1');
    await push(repo, 'latest');
    await push(`builds/${b.id}/app`, '1');

    expect((await remove(`${host}/${repo}:1`, a.member)).status).toBe(403);
    const byB = await remove(`${host}/${repo}:1`, b.admin);
    expect(byB.status).toBe(404);
    expect(byB.body.message).toBe(`image ${host}/${repo}:1 not found in workspace "img-b"`);
    expect(await tags(repo)).toEqual(expect.arrayContaining(['1', 'latest']));

    const deleted = await remove(`${host}/${repo}:1`, a.admin);
    expect(deleted.status).toBe(200);
    expect(deleted.body).toEqual({ image: `${host}/${repo}:1`, digest });
    expect(await tags(repo)).toEqual([]);
    expect((await remove(`${host}/${repo}:1`, a.admin)).status).toBe(404);

    // The operator deletes any workspace's image.
    expect((await remove(`${host}/builds/${b.id}/app:1`, OPERATOR)).status).toBe(200);
    expect(await tags(`builds/${b.id}/app`)).toEqual([]);
  }, 120_000);

  it('refuses an image a deployment or a live sandbox runs, naming it, until it is gone; and says what is wrong with a bad ref', async () => {
    const c = await workspace('img-c');
    const repo = `builds/${c.id}/served`;
    const digest = await push(repo, '1');
    const deployed = await call('POST', '/api/v1/deployments', c.admin, {
      name: 'served',
      kind: 'endpoint',
      image: `${host}/${repo}:1`,
      command: ['/bin/server'],
    });
    expect(deployed.status).toBe(201);
    const refused = await remove(`${host}/${repo}:1`, c.admin);
    expect(refused.status).toBe(409);
    expect(refused.body.message).toMatch(/in use by deployment served: /);
    expect(await tags(repo)).toEqual(['1']);
    expect((await call('DELETE', '/api/v1/deployments/served', c.admin)).status).toBe(200);

    // A live sandbox running it (as the sandboxes API records one: the image pinned).
    const db = new pg.Client({ connectionString: gateway.schema.url, options: `-c search_path=${gateway.schema.schema}` });
    await db.connect();
    try {
      await db.query(
        `INSERT INTO sandboxes (id, workspace_id, pool, state, spec, requested, timeout_seconds)
         VALUES ('sb-served', $1, 'default', 'running', $2, '{}', 300)`,
        [c.id, JSON.stringify({ image: `${host}/${repo}@${digest}` })],
      );
      const bySandbox = await remove(`${host}/${repo}@${digest}`, c.admin);
      expect(bySandbox.status).toBe(409);
      expect(bySandbox.body.message).toMatch(/in use by sandbox sb-served: /);
      await db.query(`UPDATE sandboxes SET state = 'terminated', ended_at = now() WHERE id = 'sb-served'`);
    } finally {
      await db.end();
    }
    expect((await remove(`${host}/${repo}:1`, c.admin)).status).toBe(200);

    expect((await remove('not a reference', c.admin)).status).toBe(400);
    const elsewhere = await remove(`registry.example.com/builds/${c.id}/app:1`, c.admin);
    expect(elsewhere.status).toBe(400);
    expect(elsewhere.body.message).toMatch(/not in Tern's registry/);
    expect((await call('DELETE', '/api/v1/images', c.admin)).status).toBe(400);
  }, 120_000);

  it("empties a deleted workspace's build repositories", async () => {
    const d = await workspace('img-d');
    await push(`builds/${d.id}/one`, '1');
    await push(`builds/${d.id}/two`, '1');
    const deleted = await call('DELETE', `/api/v1/workspaces/${d.id}`, OPERATOR);
    expect(deleted.status).toBe(200);
    expect(deleted.body).toMatchObject({ deletedImages: 2, problems: [] });
    expect(await tags(`builds/${d.id}/one`)).toEqual([]);
    expect(await tags(`builds/${d.id}/two`)).toEqual([]);
  }, 120_000);

  it('is deleteImage in the TypeScript SDK and tern.delete_image in the Python SDK', async () => {
    const e = await workspace('img-e');
    const digest = await push(`builds/${e.id}/ts`, '1');
    await push(`builds/${e.id}/py`, '1');
    const client = new TernClient({ gateway: gateway.base, token: e.admin });
    expect(await client.deleteImage(`${host}/builds/${e.id}/ts:1`)).toEqual({ image: `${host}/builds/${e.id}/ts:1`, digest });
    await expect(client.deleteImage(`${host}/builds/${e.id}/ts:1`)).rejects.toBeInstanceOf(TernNotFoundError);

    const ref = `${host}/builds/${e.id}/py:1`;
    expect(await deleteTwiceInPython('delete_image', ref, gateway.base, e.admin)).toEqual([{ image: ref, digest }, { again: 404 }]);
    expect(await tags(`builds/${e.id}/py`)).toEqual([]);
  }, 120_000);
});
