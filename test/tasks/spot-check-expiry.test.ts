import { createHash } from 'node:crypto';
import pg from 'pg';
import { runningGateway } from '../support/gateway.js';
import { counterValue } from '../support/metrics.js';
import { waitFor } from '../support/processes.js';

const OPERATOR = `tern_${'s'.repeat(43)}`;

/**
 * The gateway's spot-check sweeper against Postgres: a check whose verifier never answered expires
 * past the task's timeout plus SPOT_CHECK_MARGIN_SECONDS, counted once; one still within its
 * wait stays pending.
 */
describe('spot checks whose verifier never answers', () => {
  const gateway = runningGateway('spotexp', OPERATOR, { SPOT_CHECK_MARGIN_SECONDS: '5' });
  let db: pg.Client;

  beforeAll(async () => {
    db = new pg.Client({ connectionString: gateway.schema.url, options: `-c search_path=${gateway.schema.schema}` });
    await db.connect();
  });
  afterAll(async () => {
    await db?.end();
  });

  const call = async (method: string, path: string, body: unknown, contentType = 'application/json') => {
    const res = await fetch(`${gateway.base}${path}`, {
      method,
      headers: { authorization: `Bearer ${OPERATOR}`, 'content-type': contentType },
      body: Buffer.isBuffer(body) ? body : JSON.stringify(body),
    });
    return { status: res.status, body: (await res.json()) as any };
  };

  /** A completed task of the queue whose check was asked `agoSeconds` ago of a verifier that never answered. */
  async function checkedTask(timeoutSeconds: number, agoSeconds: number): Promise<string> {
    const { body } = await call('POST', '/taskqueue/checked', { n: 1 });
    const check = {
      state: 'pending',
      machineId: 'm-checked',
      attempt: 1,
      resultSha256: `sha256:${'1'.repeat(64)}`,
      verifierMachineId: 'm-silent',
      verifierContainerId: 'c-silent',
      requestedAt: new Date(Date.now() - agoSeconds * 1000).toISOString(),
    };
    await db.query(`UPDATE tasks SET state = 'COMPLETE', ended_at = now(), timeout_seconds = $2, spot_check = $3::jsonb WHERE id = $1`, [
      body.task_id,
      timeoutSeconds,
      JSON.stringify(check),
    ]);
    return body.task_id as string;
  }
  const checkOf = async (id: string) => (await db.query(`SELECT spot_check FROM tasks WHERE id = $1`, [id])).rows[0].spot_check;

  it('expires the overdue check with its reason and counts it, and leaves the one still within its wait', async () => {
    const bundle = Buffer.from('spot check expiry');
    const digest = `sha256:${createHash('sha256').update(bundle).digest('hex')}`;
    expect((await call('PUT', `/api/v1/code/${digest}`, bundle, 'application/gzip')).status).toBe(201);
    const deployed = await call('POST', '/api/v1/deployments', { name: 'checked', kind: 'task_queue', handler: 'app.py:f', code: digest });
    expect(deployed.status).toBe(201);
    const before = await counterValue(gateway.base, 'tern_spot_checks_total', { outcome: 'expired' });

    const overdue = await checkedTask(60, 70);
    const waiting = await checkedTask(3600, 70);
    await waitFor('the sweeper to expire the overdue check', async () => (await checkOf(overdue)).state === 'expired', 30_000);
    expect(await checkOf(overdue)).toMatchObject({
      state: 'expired',
      verifierMachineId: 'm-silent',
      reason: expect.stringMatching(/^the verifier m-silent did not answer within 65 s/),
      checkedAt: expect.any(String),
    });
    expect(await counterValue(gateway.base, 'tern_spot_checks_total', { outcome: 'expired' })).toBe(before + 1);
    expect((await checkOf(waiting)).state).toBe('pending');
    const shown = await call('GET', `/api/v1/tasks/${overdue}`, undefined);
    expect(shown.body.spot_check).toMatchObject({ state: 'expired' });
    expect(shown.body.status).toBe('COMPLETE');
  }, 60_000);
});
