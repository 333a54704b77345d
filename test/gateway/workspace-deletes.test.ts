import { createHash, randomBytes } from 'node:crypto';
import pg from 'pg';
import { TernClient, TernNotFoundError } from '#tern/client';
import { newUserKey } from '#tern/nats-auth';
import { callGateway, runningGateway } from '../support/gateway.js';
import { tern } from '../machines/harness.js';
import { waitFor } from '../support/processes.js';
import { deleteTwiceInPython } from '../support/python-sdk.js';

const OPERATOR = `tern_${'d'.repeat(43)}`;

/**
 * DELETE /api/v1/workspaces/:id through the API against a real gateway, Postgres and NATS: a
 * workspace with tokens, a NATS user, deployments with a waiting task, a live sandbox, a secret,
 * a volume and usage is deleted, and each consequence is checked; a neighbour is untouched.
 */
describe('deleting a workspace', () => {
  const gateway = runningGateway('wsdelete', OPERATOR, { SECRETS_KEY: randomBytes(32).toString('base64') });
  let db: pg.Client;

  const call = (method: string, path: string, token: string, body?: unknown, contentType?: string) =>
    callGateway(gateway.base, method, path, token, body, { contentType });
  const one = async (sql: string, params: unknown[]) => (await db.query(sql, params)).rows[0] as Record<string, unknown> | undefined;

  /** A workspace with an admin and a member token, code, an endpoint and a task queue holding one waiting task. */
  async function workspaceWithWork(name: string) {
    const made = await call('POST', '/api/v1/workspaces', OPERATOR, { name });
    expect(made.status).toBe(201);
    const admin = made.body.token as string;
    const member = (await call('POST', '/api/v1/tokens', admin, { name: 'member' })).body.token as string;
    const bundle = Buffer.from(`${name} code`);
    const digest = `sha256:${createHash('sha256').update(bundle).digest('hex')}`;
    expect((await call('PUT', `/api/v1/code/${digest}`, admin, bundle, 'application/gzip')).status).toBe(201);
    for (const [deployment, kind] of [
      ['app', 'endpoint'],
      ['queue', 'task_queue'],
    ])
      expect((await call('POST', '/api/v1/deployments', admin, { name: deployment, kind, handler: 'app.py:f', code: digest })).status).toBe(
        201,
      );
    const task = await call('POST', '/taskqueue/queue', admin, { x: 1 });
    expect(task.status).toBe(202);
    return { id: made.body.workspace.id as string, admin, member, taskId: task.body.task_id as string };
  }

  beforeAll(async () => {
    db = new pg.Client({ connectionString: gateway.schema.url, options: `-c search_path=${gateway.schema.schema}` });
    await db.connect();
  });

  afterAll(async () => {
    await db?.end();
  });

  it('takes what the workspace holds with it, keeps its usage, and leaves its neighbour alone', async () => {
    const doomed = await workspaceWithWork('doomed');
    const neighbour = await workspaceWithWork('neighbour');
    expect((await call('PUT', '/api/v1/secrets/hf_token', doomed.admin, { value: 'hf_secret' })).status).toBe(200);
    expect((await call('POST', '/api/v1/volumes', doomed.admin, { name: 'weights' })).status).toBe(201);
    const file = await call('PUT', '/api/v1/volumes/weights/files?path=w.bin', doomed.admin, Buffer.from('w'), 'application/octet-stream');
    expect(file.status).toBe(200);
    const natsUser = await call('POST', '/api/v1/nats/users', doomed.admin, {
      name: 'bridge',
      allow: ['events'],
      publicKey: newUserKey().publicKey,
    });
    expect(natsUser.status).toBe(201);
    await db.query(`INSERT INTO machines (id, pool, state) VALUES ('doomed-box', 'default', 'ready')`);
    await db.query(
      `INSERT INTO sandboxes (id, workspace_id, machine_id, pool, state, spec, requested, timeout_seconds, started_at)
       VALUES ('sb-doomed', $1, 'doomed-box', 'default', 'running', '{}', '{}', 300, now())`,
      [doomed.id],
    );
    const app = await one(`SELECT id FROM deployments WHERE workspace_id = $1 AND name = 'app'`, [doomed.id]);
    await db.query(
      `INSERT INTO usage_intervals (event_id, workspace_id, deployment_id, container_id, machine_id, cpu_millicores, memory_bytes, period_start, period_end, seconds)
       VALUES ('ev-doomed', $1, $2, 'c-doomed', 'doomed-box', 1000, 1073741824, now() - interval '1 minute', now(), 60)`,
      [doomed.id, app!.id],
    );

    const deleted = await call('DELETE', `/api/v1/workspaces/${doomed.id}`, OPERATOR);
    expect(deleted.status).toBe(200);
    expect(deleted.body).toEqual({
      id: doomed.id,
      name: 'doomed',
      revokedTokens: 2,
      revokedNatsUsers: 1,
      deletedDeployments: 2,
      terminatedSandboxes: 1,
      destroyedSecrets: 1,
      deletedVolumes: 1,
      deletedImages: 0,
      problems: [],
    });

    // Its tokens: 401 for every request, at once.
    for (const token of [doomed.admin, doomed.member]) {
      const res = await call('GET', '/api/v1/deployments', token);
      expect(res.status).toBe(401);
    }
    // Its deployments are deleted as DELETE /deployments/:name does, its waiting task cancelled.
    const states = await db.query(`SELECT name, state, state_reason FROM deployments WHERE workspace_id = $1 ORDER BY name`, [doomed.id]);
    expect(states.rows.map((r) => [r.name, r.state])).toEqual([
      ['app', 'deleted'],
      ['queue', 'deleted'],
    ]);
    expect(await one(`SELECT state FROM tasks WHERE id = $1`, [doomed.taskId])).toEqual({ state: 'CANCELLED' });
    expect(await one(`SELECT state FROM sandboxes WHERE id = 'sb-doomed'`, [])).toEqual({ state: 'terminated' });
    expect(await one(`SELECT count(*)::int AS n FROM workspace_secrets WHERE workspace_id = $1`, [doomed.id])).toEqual({ n: 0 });
    expect(await one(`SELECT count(*)::int AS n FROM volumes WHERE workspace_id = $1`, [doomed.id])).toEqual({ n: 0 });
    expect(await one(`SELECT revoked_at IS NOT NULL AS revoked FROM nats_users WHERE id = $1`, [natsUser.body.id])).toEqual({
      revoked: true,
    });
    // Its usage stays, for billing.
    expect(await one(`SELECT seconds FROM usage_intervals WHERE event_id = 'ev-doomed'`, [])).toEqual({ seconds: 60 });
    expect((await call('GET', `/api/v1/usage?workspace=${doomed.id}`, OPERATOR)).status).toBe(200);

    // Gone from the operator's list; a second delete is 404; its name is not given again.
    expect((await call('GET', '/api/v1/workspaces', OPERATOR)).body.map((w: { id: string }) => w.id)).not.toContain(doomed.id);
    const again = await call('DELETE', `/api/v1/workspaces/${doomed.id}`, OPERATOR);
    expect(again.status).toBe(404);
    const reused = await call('POST', '/api/v1/workspaces', OPERATOR, { name: 'doomed' });
    expect(reused.status).toBe(409);
    expect(reused.body.message).toMatch(/was deleted at .*not given again/);

    // The neighbour's tokens, deployments and task are as they were.
    expect((await call('GET', '/api/v1/deployments/queue', neighbour.member)).body.state).not.toBe('deleted');
    expect((await call('GET', `/api/v1/tasks/${neighbour.taskId}`, neighbour.member)).body.status).toBe('PENDING');
  }, 120_000);

  it('refuses the default workspace, one holding an operator token, and any caller but the operator', async () => {
    const defaultId = (await call('GET', '/api/v1/workspace', OPERATOR)).body.id as string;
    const ownDefault = await call('DELETE', `/api/v1/workspaces/${defaultId}`, OPERATOR);
    expect(ownDefault.status).toBe(409);
    expect(ownDefault.body.message).toMatch(/"default" holds the bootstrap operator token/);

    const kept = await call('POST', '/api/v1/workspaces', OPERATOR, { name: 'kept' });
    const keptId = kept.body.workspace.id as string;
    const admin = kept.body.token as string;
    expect((await call('DELETE', `/api/v1/workspaces/${keptId}`, admin)).status).toBe(403);
    await db.query(`UPDATE api_tokens SET role = 'operator' WHERE id = $1`, [kept.body.tokenId]);
    const holding = await call('DELETE', `/api/v1/workspaces/${keptId}`, OPERATOR);
    expect(holding.status).toBe(409);
    expect(holding.body.message).toMatch(/holds operator token\(s\) admin .*revoke them first/);
    expect((await call('GET', '/api/v1/workspace', admin)).status).toBe(200);

    expect((await call('DELETE', '/api/v1/workspaces/8d6f4a52-0000-4000-8000-000000000000', OPERATOR)).status).toBe(404);
    const malformed = await call('DELETE', '/api/v1/workspaces/not-a-uuid', OPERATOR);
    expect(malformed.status).toBe(400);
  });

  it('is `tern workspace rm` on the command line, which says what went; a second rm fails saying why', async () => {
    const made = await call('POST', '/api/v1/workspaces', OPERATOR, { name: 'by-cli' });
    const id = made.body.workspace.id as string;
    expect((await tern(['workspace', 'list'], gateway.base, OPERATOR)).stdout).toContain(id);
    const removed = await tern(['workspace', 'rm', id], gateway.base, OPERATOR);
    expect(removed.code).toBe(0);
    expect(removed.stdout).toContain(`Workspace by-cli (${id}) deleted; its usage is kept.`);
    expect(removed.stdout).toMatch(/tokens revoked: +1/);
    const again = await tern(['workspace', 'rm', id], gateway.base, OPERATOR);
    expect(again.code).not.toBe(0);
    expect(again.stderr).toContain(`workspace ${id} not found`);
  });

  it('is deleteWorkspace in the TypeScript SDK and tern.delete_workspace in the Python SDK', async () => {
    const client = new TernClient({ gateway: gateway.base, token: OPERATOR });
    const fromTs = (await call('POST', '/api/v1/workspaces', OPERATOR, { name: 'by-ts-sdk' })).body.workspace.id as string;
    expect(await client.deleteWorkspace(fromTs)).toMatchObject({ id: fromTs, name: 'by-ts-sdk', revokedTokens: 1, problems: [] });
    await expect(client.deleteWorkspace(fromTs)).rejects.toBeInstanceOf(TernNotFoundError);

    const fromPy = (await call('POST', '/api/v1/workspaces', OPERATOR, { name: 'by-py-sdk' })).body.workspace.id as string;
    const [deleted, again] = await deleteTwiceInPython('delete_workspace', fromPy, gateway.base, OPERATOR);
    expect(deleted).toMatchObject({ id: fromPy, name: 'by-py-sdk', revokedTokens: 1, problems: [] });
    expect(again).toEqual({ again: 404 });
  });

  it('is resumed at the next start when the gateway deleting it died midway', async () => {
    const halfDone = await workspaceWithWork('half-done');
    expect((await call('PUT', '/api/v1/secrets/hf_token', halfDone.admin, { value: 'hf_secret' })).status).toBe(200);
    // The gateway marked it deleted, revoked the admin token and died; its claim lapsed.
    await gateway.process.kill('SIGKILL');
    await db.query(
      `UPDATE workspaces SET deleted_at = now(), deleted_by = 'tok-gone', purge_claimed_until = now() - interval '1 second' WHERE id = $1`,
      [halfDone.id],
    );
    await db.query(`UPDATE api_tokens SET revoked_at = now() WHERE workspace_id = $1 AND name = 'admin'`, [halfDone.id]);

    gateway.process.lines.length = 0;
    gateway.process.start();
    await gateway.process.ready();
    await waitFor(
      'the purge to finish',
      async () => (await one(`SELECT purged_at FROM workspaces WHERE id = $1`, [halfDone.id]))?.purged_at,
    );

    expect((await call('GET', '/api/v1/deployments', halfDone.member)).status).toBe(401);
    const states = await db.query(`SELECT name, state, state_reason FROM deployments WHERE workspace_id = $1 ORDER BY name`, [halfDone.id]);
    expect(states.rows.map((r) => [r.name, r.state])).toEqual([
      ['app', 'deleted'],
      ['queue', 'deleted'],
    ]);
    expect(states.rows[0].state_reason).toMatch(/^deleted by token tok-gone/);
    expect(await one(`SELECT state FROM tasks WHERE id = $1`, [halfDone.taskId])).toEqual({ state: 'CANCELLED' });
    expect(await one(`SELECT count(*)::int AS n FROM workspace_secrets WHERE workspace_id = $1`, [halfDone.id])).toEqual({ n: 0 });
    expect(await one(`SELECT purge_claimed_until FROM workspaces WHERE id = $1`, [halfDone.id])).toEqual({ purge_claimed_until: null });
  }, 120_000);
});
