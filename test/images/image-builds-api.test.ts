import { createHash } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runningGateway } from '../support/gateway.js';
import { describeNeeding } from '../support/real-parts.js';
import { pushTestBase, staticRegistryEnv, TestRegistry } from './support.js';

const describeApi = await describeNeeding(['root', 'skopeo', 'docker-registry', 'debootstrap']);

const ADMIN = `tern_${'i'.repeat(43)}`;

/** The build API before anything runs: what it refuses, and why, with no builder machine online. */
describeApi('POST /api/v1/images/builds: refusals that say what to fix', () => {
  let work: string;
  let registry: TestRegistry;
  beforeAll(async () => {
    work = await mkdtemp(join(tmpdir(), 'tern-build-api-'));
    registry = await TestRegistry.start(join(work, 'registry'));
  }, 60_000);
  const gateway = runningGateway(
    'buildapi',
    ADMIN,
    staticRegistryEnv(() => registry),
  );
  afterAll(async () => {
    await registry?.stop();
    if (work) await rm(work, { recursive: true, force: true });
  });

  const build = async (body: object, token = ADMIN) => {
    const res = await fetch(`${gateway.base}/api/v1/images/builds`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    return { status: res.status, body: (await res.json()) as { message: string | string[] } };
  };

  it('refuses a build field that breaks its rule, naming the field', async () => {
    const r = await build({ image: { apt: ['Not A Package'] } });
    expect(r.status).toBe(400);
    expect(String(r.body.message)).toContain('image.apt: apt must list Debian package names');
    const reference = await build({ image: 'registry.example.com/team/model:1' });
    expect(reference.status).toBe(400);
    expect(String(reference.body.message)).toContain('image must be a build');
    const name = await build({ name: 'Bad Name', image: { commands: ['true'] } });
    expect(String(name.body.message)).toContain('name must be 1-63 lower-case letters');
  });

  it("refuses a base it cannot resolve, naming it, and says how to push Tern's base when that is missing", async () => {
    const unreachable = await build({ image: { base: '127.0.0.1:1/team/base:1', commands: ['true'] } });
    expect(unreachable.status).toBe(400);
    expect(String(unreachable.body.message)).toMatch(/^image\.base: image 127\.0\.0\.1:1\/team\/base:1: cannot resolve in its registry/);
    const missing = await build({ image: { commands: ['true'] } });
    expect(missing.status).toBe(400);
    expect(String(missing.body.message)).toContain(`image.base: image ${registry.host}/tern/base:bookworm`);
    expect(String(missing.body.message)).toContain("push Tern's base once with: sudo tern image base");
  }, 60_000);

  it("refuses pip_wheels without the uploaded folder, and another workspace's folder as if it did not exist", async () => {
    const base = (await pushTestBase(registry)).ref;
    const image = { base, pip: ['x==1'], pip_wheels: 'wheels' };
    const none = await build({ image });
    expect(none.status).toBe(400);
    expect(String(none.body.message)).toContain("image.pip_wheels reads the spec's folder");
    const unknown = await build({ image, code: `sha256:${'0'.repeat(64)}` });
    expect(unknown.status).toBe(404);

    const folder = Buffer.from('workspace a folder');
    const digest = `sha256:${createHash('sha256').update(folder).digest('hex')}`;
    const put = await fetch(`${gateway.base}/api/v1/code/${digest}`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/gzip' },
      body: folder,
    });
    expect(put.status).toBe(201);
    const other = await fetch(`${gateway.base}/api/v1/workspaces`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'build-tenant-b' }),
    });
    const b = (await other.json()) as { token: string };
    const foreign = await build({ image, code: digest }, b.token);
    expect(foreign).toEqual({
      status: 404,
      body: expect.objectContaining({ message: `code ${digest} not found: upload the spec's folder first` }),
    });
  }, 900_000);

  it("refuses to deploy another workspace's build, and names where the workspace's own builds live", async () => {
    const created = await fetch(`${gateway.base}/api/v1/workspaces`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'build-tenant-c' }),
    });
    const c = (await created.json()) as { workspace: { id: string }; token: string };
    const deploy = await fetch(`${gateway.base}/api/v1/deployments`, {
      method: 'POST',
      headers: { authorization: `Bearer ${c.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        name: 'borrowed',
        kind: 'endpoint',
        command: ['serve'],
        image: `${registry.host}/builds/not-${c.workspace.id}/numpy:1`,
      }),
    });
    expect(deploy.status).toBe(400);
    expect(JSON.stringify(await deploy.json())).toContain(
      `builds/ holds each workspace's own builds under builds/${c.workspace.id}/: name one of yours`,
    );
  });

  it('answers 503 naming AGENT_BUILDER=true when no machine offers building', async () => {
    const base = (await pushTestBase(registry)).ref;
    const r = await build({ image: { base, commands: ['true'] } });
    expect(r.status).toBe(503);
    expect(r.body.message).toBe(
      'no machine offers building: start an agent with AGENT_BUILDER=true (or tern-agent init --builder); npm run up starts its local agent as one',
    );
  }, 900_000);
});
