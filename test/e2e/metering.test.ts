import { cpSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { startStack, type Stack } from '../support/stack.js';
import { waitFor } from '../support/processes.js';

const EXAMPLES = fileURLToPath(new URL('../../examples', import.meta.url));

/**
 * The whole path with a real agent and runc: a container started by a request and stopped by
 * scale-to-zero is metered for the lifetime its agent reported, and within what the test saw.
 */
describe('metering end to end', () => {
  let stack: Stack;
  let db: pg.Client;

  const api = async (path: string, init: RequestInit = {}) => {
    const res = await fetch(`${stack.gateway}${path}`, {
      ...init,
      headers: { authorization: `Bearer ${stack.token}`, 'content-type': 'application/json', ...init.headers },
    });
    return { status: res.status, body: (await res.json()) as any };
  };

  beforeAll(async () => {
    stack = await startStack('metere2e');
    db = new pg.Client({ connectionString: stack.env.DATABASE_URL, options: `-c search_path=${stack.env.DATABASE_SCHEMA}` });
    await db.connect();
  }, 120_000);

  afterAll(async () => {
    await db?.end();
    await stack?.stop();
  });

  it('meters a real container for its lifetime, per deployment and per machine', async () => {
    const dir = stack.scratch('metered');
    cpSync(join(EXAMPLES, 'hello-python'), dir, { recursive: true });
    const spec = readFileSync(join(dir, 'tern.yaml'), 'utf8')
      .replace(/^name:.*$/m, 'name: metered')
      .replace(/^keep_warm_seconds:.*$/m, 'keep_warm_seconds: 3');
    writeFileSync(join(dir, 'tern.yaml'), spec);
    expect((await stack.tern('deploy', join(dir, 'tern.yaml'))).code).toBe(0);
    const deployment = (await api('/api/v1/deployments/metered')).body;

    const before = Date.now();
    const first = await api('/endpoint/metered', { method: 'POST', body: JSON.stringify({ name: 'Ada' }) });
    expect(first.status).toBe(200);
    await new Promise((r) => setTimeout(r, 1500));
    expect((await api('/endpoint/metered', { method: 'POST', body: JSON.stringify({ name: 'Grace' }) })).status).toBe(200);
    const lastAnswer = Date.now();

    const container = await waitFor(
      'the container to stop and its usage to close',
      async () => {
        const { rows } = await db.query(
          `SELECT c.container_id, c.machine_id, c.started_at, c.ended_at, c.end_reason FROM metered_containers c WHERE c.deployment_id = $1`,
          [deployment.deploymentId],
        );
        if (rows.length === 1 && rows[0].ended_at) return rows[0];
        // Say what was seen, should it time out.
        const { rows: scheduled } = await db.query(`SELECT id, state, started_at, stopped_at FROM containers`);
        throw new Error(`metered ${JSON.stringify(rows)}, scheduler's containers ${JSON.stringify(scheduled)}`);
      },
      40_000,
      250,
    );
    const after = Date.now();
    const lifetime = (container.ended_at.getTime() - container.started_at.getTime()) / 1000;
    // It ran past the second answer by keep-warm, and not beyond what the test saw.
    expect(lifetime).toBeGreaterThan((lastAnswer - container.started_at.getTime()) / 1000 + 2.5);
    expect(lifetime).toBeLessThan((after - before) / 1000 + 1);
    expect(container.end_reason).toBe('stopped');

    // The scheduler recorded the same lifetime from the same events.
    const { rows: recorded } = await db.query(`SELECT started_at, stopped_at FROM containers WHERE id = $1`, [container.container_id]);
    expect(recorded[0].started_at.getTime()).toBe(container.started_at.getTime());
    expect(Math.abs(recorded[0].stopped_at.getTime() - container.ended_at.getTime())).toBeLessThanOrEqual(lifetime * 10); // ≤ 1 % of the lifetime, in ms

    const window = `from=${new Date(before - 60_000).toISOString()}&to=${new Date(Date.now() + 60_000).toISOString()}`;
    const byDeployment = await api(`/api/v1/usage?group_by=deployment&${window}`);
    const row = byDeployment.body.rows.find((r: any) => r.group === deployment.deploymentId);
    expect(row.name).toBe('metered');
    expect(row.containerSeconds).toBeCloseTo(lifetime, 3);
    expect(row.cpuCoreSeconds).toBeCloseTo(lifetime * 0.5, 3);
    expect(row.memoryGibSeconds).toBeCloseTo(lifetime / 4, 3);
    const byMachine = await api(`/api/v1/usage?group_by=machine&${window}`);
    expect(byMachine.body.rows.find((r: any) => r.group === container.machine_id).containerSeconds).toBeCloseTo(lifetime, 3);

    const cli = await stack.tern('usage', '--group-by', 'deployment', '--from', new Date(before - 60_000).toISOString());
    expect(cli.stdout).toMatch(/^metered \(/m);
  }, 90_000);
});
