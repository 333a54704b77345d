import pg from 'pg';
import { randomUUID } from 'node:crypto';
import type { NatsConnection } from '@nats-io/transport-node';
import { TASK_COMPLETED, TASK_FAILED, TASK_STARTED } from '#tern/contracts';
import { connectNats, Messaging, Namespace } from '#tern/messaging';
import { createTestSchema, TEST_NATS, testEnv, type TestSchema, uniqueName } from '../support/isolation.js';
import { deleteNamespaces } from '../support/nats.js';
import { freePort, ServiceProcess, waitFor } from '../support/processes.js';

/**
 * The gateway's task state machine, fed real events over JetStream in the orders and
 * repetitions at-least-once delivery produces: a final state is never left, the first
 * completion wins, an old attempt's event never overwrites a newer attempt.
 */
describe('task ledger (gateway)', () => {
  let schema: TestSchema;
  let ns: Namespace;
  let gateway: ServiceProcess;
  let nc: NatsConnection;
  let messaging: Messaging;
  let db: pg.Client;
  let workspaceId: string;
  let deploymentId: string;

  beforeAll(async () => {
    schema = await createTestSchema('ledger');
    ns = new Namespace(uniqueName('ledger'));
    gateway = new ServiceProcess('gateway', testEnv(schema, ns.name, { HTTP_PORT: String(await freePort()) })).start();
    await gateway.ready();
    nc = await connectNats({ ...TEST_NATS, name: 'ledger-test' });
    messaging = new Messaging(nc, ns);
    db = new pg.Client({ connectionString: schema.url });
    await db.connect();
    await db.query(`SET search_path TO "${schema.schema}"`);
    workspaceId = (await db.query(`INSERT INTO workspaces (name) VALUES ('ledger') RETURNING id`)).rows[0].id;
    deploymentId = (
      await db.query(
        `INSERT INTO deployments (workspace_id, name, kind, state, latest_version) VALUES ($1, 'q', 'task_queue', 'ready', 1) RETURNING id`,
        [workspaceId],
      )
    ).rows[0].id;
  });

  afterAll(async () => {
    await db?.end();
    await gateway?.stop();
    await nc?.close();
    await deleteNamespaces(ns.name);
    await schema?.drop();
  });

  async function task(): Promise<string> {
    const id = randomUUID();
    await db.query(
      `INSERT INTO tasks (id, workspace_id, deployment_id, state, payload, max_retries, timeout_seconds) VALUES ($1, $2, $3, 'PENDING', '{}', 3, 60)`,
      [id, workspaceId, deploymentId],
    );
    return id;
  }
  const row = async (id: string) =>
    (await db.query(`SELECT state, attempts, result, error, machine_id FROM tasks WHERE id = $1`, [id])).rows[0];
  const base = (taskId: string) => ({ taskId, deploymentId, deploymentVersion: 1, workspaceId, containerId: 'c-1', machineId: 'm-1' });
  const started = (id: string, attempt: number) =>
    messaging.publish(TASK_STARTED, { ...base(id), attempt, startedAt: new Date().toISOString() });
  const completed = (id: string, attempt: number, result: unknown, machineId = 'm-1') =>
    messaging.publish(TASK_COMPLETED, { ...base(id), machineId, attempt, durationMs: 5, result, completedAt: new Date().toISOString() });
  const failed = (id: string, attempt: number, willRetry: boolean, cause: 'error' | 'timeout' | 'container-lost' = 'error') =>
    messaging.publish(TASK_FAILED, {
      ...base(id),
      attempt,
      cause,
      error: `boom ${attempt}`,
      willRetry,
      failedAt: new Date().toISOString(),
    });
  const settled = (id: string, state: string) => waitFor(`task ${state}`, async () => (await row(id)).state === state, 10_000, 100);

  it('follows started → failed (retry) → started → completed', async () => {
    const id = await task();
    await started(id, 1);
    await settled(id, 'RUNNING');
    await failed(id, 1, true);
    await settled(id, 'RETRY');
    await started(id, 2);
    await settled(id, 'RUNNING');
    await completed(id, 2, { ok: true });
    await settled(id, 'COMPLETE');
    expect(await row(id)).toMatchObject({ state: 'COMPLETE', attempts: 2, result: { ok: true }, error: null });
  });

  it('keeps the first completion: a second one (the task ran twice) changes nothing', async () => {
    const id = await task();
    await completed(id, 1, { first: true }, 'm-1');
    await settled(id, 'COMPLETE');
    await completed(id, 2, { second: true }, 'm-2');
    await failed(id, 2, false);
    await new Promise((r) => setTimeout(r, 1000));
    expect(await row(id)).toMatchObject({ state: 'COMPLETE', result: { first: true }, machine_id: 'm-1' });
  });

  it('ignores an older attempt that reports after a newer one started, and a start after the end', async () => {
    const id = await task();
    await started(id, 2);
    await settled(id, 'RUNNING');
    await failed(id, 1, true);
    await new Promise((r) => setTimeout(r, 800));
    expect(await row(id)).toMatchObject({ state: 'RUNNING', attempts: 2 });
    await failed(id, 2, false, 'timeout');
    await settled(id, 'TIMEOUT');
    await started(id, 3);
    await new Promise((r) => setTimeout(r, 800));
    expect(await row(id)).toMatchObject({ state: 'TIMEOUT', attempts: 2, error: 'timeout: boom 2' });
  });

  it('reports an attempt that never reported as lost on its own machine when the next one starts', async () => {
    const id = await task();
    const seen: { attempt: number; cause: string; machineId?: string; willRetry: boolean }[] = [];
    const sub = nc.subscribe(messaging.subject(TASK_FAILED), {
      callback: (_e, msg) => {
        const f = msg.json<{ taskId: string; attempt: number; cause: string; machineId?: string; willRetry: boolean }>();
        if (f.taskId === id) seen.push(f);
      },
    });
    try {
      await started(id, 1);
      await settled(id, 'RUNNING');
      await messaging.publish(TASK_STARTED, { ...base(id), machineId: 'm-2', attempt: 2, startedAt: new Date().toISOString() });
      await waitFor('the lost attempt reported', async () => seen.length > 0, 10_000, 100);
      expect(seen).toEqual([expect.objectContaining({ attempt: 1, cause: 'container-lost', machineId: 'm-1', willRetry: true })]);
      expect(await row(id)).toMatchObject({ state: 'RUNNING', attempts: 2, machine_id: 'm-2' });
    } finally {
      sub.unsubscribe();
    }
  });

  it('sends a task whose gateway died between saving and publishing it', async () => {
    const id = randomUUID();
    await db.query(
      `INSERT INTO tasks (id, workspace_id, deployment_id, state, payload, max_retries, timeout_seconds, created_at) VALUES ($1, $2, $3, 'PENDING', '{"n": 1}', 3, 60, now() - interval '10 seconds')`,
      [id, workspaceId, deploymentId],
    );
    const sent = await waitFor(
      'the sweep to send it',
      async () => (await db.query(`SELECT stream_seq FROM tasks WHERE id = $1 AND enqueued_at IS NOT NULL`, [id])).rows[0],
      15_000,
      200,
    );
    const jsm = await messaging.jsm();
    const msg = await jsm.streams.getMessage(ns.stream('TASKS'), { seq: Number(sent.stream_seq) });
    expect(msg?.json<{ taskId: string; payload: unknown }>()).toMatchObject({ taskId: id, payload: { n: 1 } });
  });

  it('ends ERROR on a last failure', async () => {
    const id = await task();
    await failed(id, 4, false, 'container-lost');
    await settled(id, 'ERROR');
    expect((await row(id)).error).toMatch(/container-lost: boom 4/);
  });
});
