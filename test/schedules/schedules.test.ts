import pg from 'pg';
import { type DeploymentSpec, resolveSpec } from '#tern/contracts';
import { createTestSchema, type TestSchema, testEnv, uniqueName } from '../support/isolation.js';
import { deleteNamespaces } from '../support/nats.js';
import { freePort, ServiceProcess, waitFor } from '../support/processes.js';

/** A schedule's ticks with two scheduler replicas: each fires once, none lost when one is killed. */
describe('schedules with several scheduler replicas', () => {
  let schema: TestSchema;
  let namespace: string;
  let db: pg.Client;
  let workspaceId: string;
  const schedulers: ServiceProcess[] = [];

  /** Stored as the gateway stores a deploy: resolved, with the submitted spec beside it. */
  const spec = (name: string, schedule: Record<string, unknown>) => {
    const submitted = { name, kind: 'function', handler: 'app.py:tick', code: `sha256:${'a'.repeat(64)}`, schedule } as const;
    return { ...resolveSpec(submitted as unknown as DeploymentSpec), submitted };
  };
  const deploy = async (name: string, schedule: Record<string, unknown>, state = 'ready') => {
    const id = (
      await db.query(
        `INSERT INTO deployments (workspace_id, name, kind, state, latest_version) VALUES ($1, $2, 'function', $3, 1) RETURNING id`,
        [workspaceId, name, state],
      )
    ).rows[0].id as string;
    await db.query(`INSERT INTO deployment_versions (deployment_id, version, spec) VALUES ($1, 1, $2)`, [
      id,
      JSON.stringify(spec(name, schedule)),
    ]);
    return id;
  };
  /** The ticks fired for a deployment, with the task each made. */
  const fired = async (deploymentId: string) =>
    (
      await db.query<{ tick: Date; task_state: string; payload: unknown }>(
        `SELECT s.tick_at AS tick, t.state AS task_state, t.payload FROM schedule_ticks s JOIN tasks t ON t.id = s.task_id
         WHERE s.deployment_id = $1 ORDER BY s.tick_at`,
        [deploymentId],
      )
    ).rows;
  const tasksOf = async (deploymentId: string) =>
    Number((await db.query(`SELECT count(*) FROM tasks WHERE deployment_id = $1`, [deploymentId])).rows[0].count);

  beforeAll(async () => {
    schema = await createTestSchema('sched');
    namespace = uniqueName('sched');
    for (let i = 0; i < 2; i++)
      schedulers.push(new ServiceProcess('scheduler', testEnv(schema, namespace, { HTTP_PORT: String(await freePort()) })).start());
    await Promise.all(schedulers.map((s) => s.ready()));
    db = new pg.Client({ connectionString: schema.url, options: `-c search_path=${schema.schema}` });
    await db.connect();
    workspaceId = (await db.query(`INSERT INTO workspaces (name) VALUES ('acme') RETURNING id`)).rows[0].id;
  }, 120_000);

  afterAll(async () => {
    await Promise.all(schedulers.map((s) => s.stop()));
    await db?.end();
    await schema?.drop();
    await deleteNamespaces(namespace);
  });

  it('fires an every-second cron once per tick with two replicas, and loses none when one is killed -9', async () => {
    const id = await deploy('every-second', { cron: '*/1 * * * * *', input: { hello: 'world' } });
    await waitFor('first ticks', async () => (await fired(id)).length >= 3, 30_000, 200);
    await new Promise((r) => setTimeout(r, 12_000));
    await schedulers[0].kill('SIGKILL');
    await new Promise((r) => setTimeout(r, 12_000));
    await db.query(`UPDATE deployments SET state = 'stopped' WHERE id = $1`, [id]);
    await new Promise((r) => setTimeout(r, 1_000)); // a tick claimed as the stop lands is still fired
    const ticks = await fired(id);
    const seconds = ticks.map((t) => t.tick.getTime() / 1000);
    expect(seconds.every(Number.isInteger)).toBe(true);
    // Every second from the first tick to the last, once: no duplicate, no gap (the kill included).
    expect(seconds).toEqual(Array.from({ length: seconds.length }, (_, i) => seconds[0] + i));
    expect(seconds.length).toBeGreaterThanOrEqual(24);
    expect(await tasksOf(id)).toBe(ticks.length);
    expect(ticks[0].payload).toEqual({ hello: 'world' });
    // Stopped: paused, no more ticks.
    await new Promise((r) => setTimeout(r, 3_000));
    expect(await tasksOf(id)).toBe(ticks.length);
  }, 120_000);

  it('after downtime skips the missed ticks (catch_up none) or runs once for them (latest)', async () => {
    const none = await deploy('skip-missed', { every: '2s' });
    const latest = await deploy('catch-latest', { every: '2s', catch_up: 'latest' });
    await waitFor('both fired', async () => (await fired(none)).length >= 1 && (await fired(latest)).length >= 1, 30_000, 200);
    for (const s of schedulers) if (s.running) await s.kill('SIGKILL'); // every replica down
    const down = Date.now();
    await new Promise((r) => setTimeout(r, 7_000));
    const before = { none: (await fired(none)).length, latest: (await fired(latest)).length };
    const restarted = Date.now();
    schedulers.push(new ServiceProcess('scheduler', testEnv(schema, namespace, { HTTP_PORT: String(await freePort()) })).start());
    await schedulers[schedulers.length - 1].ready();
    await waitFor(
      'ticking again',
      async () => (await fired(none)).length > before.none && (await fired(latest)).length > before.latest + 1,
      30_000,
      200,
    );
    // Both fire every 2 s on the same epoch-aligned ticks: the first tick of "none" after the
    // restart is the first regular one; before it, "none" fired nothing and "latest" once.
    const resumedAt = (await fired(none))[before.none].tick.getTime();
    const between = (rows: { tick: Date }[], from: number) => rows.slice(from).filter((t) => t.tick.getTime() < resumedAt);
    expect(between(await fired(none), before.none)).toHaveLength(0);
    const caughtUp = between(await fired(latest), before.latest);
    expect(caughtUp).toHaveLength(1);
    expect(caughtUp[0].tick.getTime()).toBeGreaterThan(down);
    expect(resumedAt).toBeGreaterThan(restarted);
  }, 120_000);
});
