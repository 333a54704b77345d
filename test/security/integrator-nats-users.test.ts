import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { jetstream } from '@nats-io/jetstream';
import { connect, credsAuthenticator, type Msg, type NatsConnection } from '@nats-io/transport-node';
import { type CreatedNatsUser, type NatsUserView, TASK_COMPLETED, TASK_STARTED, type TaskItem, taskConsumerName } from '#tern/contracts';
import { Messaging, Namespace } from '#tern/messaging';
import { inboxPrefix, newUserKey } from '#tern/nats-auth';
import { callGateway, runningGateway } from '../support/gateway.js';
import { TEST_NATS_URL } from '../support/isolation.js';
import { machineCreds, refused, taskPermitCreds } from '../support/nats-users.js';
import { waitFor } from '../support/processes.js';
import { insertContainers, insertMachines } from '../support/rows.js';
import { tern } from '../machines/harness.js';

const OPERATOR = `tern_${'n'.repeat(43)}`;
const enc = new TextEncoder();

/**
 * The integrators' door: `tern nats user create --allow events,submit` writes a .creds file
 * whose user hears its workspace's task events and submits its workspace's tasks over NATS,
 * and is refused by NATS on another workspace's subjects and on everything else.
 */
describe('integrator NATS users', () => {
  const gateway = runningGateway('integr', OPERATOR);
  const dir = mkdtempSync(join(tmpdir(), 'tern-integr-test-'));
  const open: NatsConnection[] = [];
  let db: pg.Client;
  let ns: string;
  const a = { id: '', admin: '', queueId: '' };
  const b = { id: '', admin: '' };
  let user: CreatedNatsUser;
  let credsFile: string;
  let nc: NatsConnection;

  const call = (method: string, path: string, token: string, body?: unknown, contentType?: string) =>
    callGateway(gateway.base, method, path, token, body, { contentType });

  /** A workspace with its admin token and a task queue named "q" of its own code. */
  const workspace = async (name: string) => {
    const w = (await call('POST', '/api/v1/workspaces', OPERATOR, { name })).body;
    const bundle = Buffer.from(`code of ${name}`);
    const digest = `sha256:${createHash('sha256').update(bundle).digest('hex')}`;
    expect((await call('PUT', `/api/v1/code/${digest}`, w.token, bundle, 'application/gzip')).status).toBe(201);
    const queue = await call('POST', '/api/v1/deployments', w.token, { name: 'q', kind: 'task_queue', handler: 'app.py:f', code: digest });
    expect(queue.status).toBe(201);
    return { id: w.workspace.id as string, admin: w.token as string, queueId: queue.body.deploymentId as string };
  };

  const connectWith = (file: string, prefix: string) =>
    connect({ servers: TEST_NATS_URL, authenticator: credsAuthenticator(readFileSync(file)), inboxPrefix: prefix, reconnect: false });

  /** Messages on a subject, as they arrive. */
  const collect = (conn: NatsConnection, subject: string) => {
    const seen: Msg[] = [];
    conn.subscribe(subject, {
      callback: (_err, msg) => {
        seen.push(msg);
      },
    });
    return seen;
  };

  beforeAll(async () => {
    ns = gateway.namespace;
    db = new pg.Client({ connectionString: gateway.schema.url, options: `-c search_path=${gateway.schema.schema}` });
    await db.connect();
    Object.assign(a, await workspace('integr-a'));
    Object.assign(b, await workspace('integr-b'));
    // The scheduler's placement of A's queue on machine m-int: the machine that runs its tasks.
    await insertMachines(db, { id: 'm-int' });
    const [version] = (await db.query(`SELECT id FROM deployment_versions WHERE deployment_id = $1`, [a.queueId])).rows;
    await insertContainers(db, { id: 'c-int', versionId: version.id, machineId: 'm-int', state: 'running' });

    credsFile = join(dir, 'bridge.creds');
    const made = await tern(
      ['nats', 'user', 'create', 'bridge', '--allow', 'events,submit', '--out', credsFile, '--json'],
      gateway.base,
      a.admin,
    );
    expect(made).toMatchObject({ code: 0 });
    user = JSON.parse(made.stdout);
    nc = await connectWith(credsFile, user.inboxPrefix);
    open.push(nc);
  });

  afterAll(async () => {
    await Promise.all(open.map((c) => c.close().catch(() => undefined)));
    await db?.end();
    rmSync(dir, { recursive: true, force: true });
  });

  it("writes a .creds file for a key made on the caller's side, for the caller's workspace only", async () => {
    expect(statSync(credsFile).mode & 0o777).toBe(0o600);
    expect(readFileSync(credsFile, 'utf8')).toContain(user.jwt);
    expect(user).toMatchObject({
      workspaceId: a.id,
      scopes: ['events', 'submit'],
      namespace: ns,
      inboxPrefix: `_INBOX.${ns}.integrator.${user.id}`,
    });
    // A's admin cannot issue for B, nor B's for A; the operator may.
    const forB = { name: 'x', workspace: b.id, allow: ['events'], publicKey: newUserKey().publicKey };
    expect((await call('POST', '/api/v1/nats/users', a.admin, forB)).status).toBe(403);
    expect((await call('POST', '/api/v1/nats/users', b.admin, { ...forB, workspace: a.id })).status).toBe(403);
    expect((await call('POST', '/api/v1/nats/users', a.admin, { ...forB, allow: ['everything'] })).status).toBe(400);
    const listed = await tern(['nats', 'user', 'list', '--json'], gateway.base, a.admin);
    expect((JSON.parse(listed.stdout) as NatsUserView[]).map((u) => u.id)).toEqual([user.id]);
    expect((await call('GET', '/api/v1/nats/users', b.admin)).body).toEqual([]);
  });

  it("hears its workspace's events and submits a task that runs", async () => {
    const submitted = collect(nc, `${ns}.task.submitted.${a.id}.v1`);
    const ended = collect(nc, `${ns}.notify.task-ended.${a.id}.v1`);
    await nc.flush();
    const reply = await nc.request(`${ns}.workspace.${a.id}.task.submit.v1`, JSON.stringify({ queue: 'q', payload: { prompt: 'hi' } }), {
      timeout: 10_000,
    });
    expect(reply.headers?.get('Tern-Error')).toBeUndefined();
    const { taskId } = reply.json<{ taskId: string }>();
    expect(reply.json()).toEqual({ taskId, status: 'PENDING', queue: 'q', version: 1 });
    await waitFor('task.submitted heard', async () => submitted.some((m) => m.json<{ taskId: string }>().taskId === taskId), 20_000);

    // The machine the queue is placed on, as itself: pulls the task, runs it, reports it.
    const machine = await connect({
      servers: TEST_NATS_URL,
      authenticator: credsAuthenticator(enc.encode(await machineCreds(ns, 'm-int'))),
      inboxPrefix: inboxPrefix(ns, 'agent', 'm-int'),
      reconnect: false,
    });
    // It pulls through the permit the gateway gives a machine for a version placed on it.
    const permit = await connect({
      servers: TEST_NATS_URL,
      authenticator: credsAuthenticator(enc.encode(await taskPermitCreds(ns, 'm-int', a.queueId, 1))),
      inboxPrefix: inboxPrefix(ns, 'agent', 'm-int'),
      reconnect: false,
    });
    open.push(machine, permit);
    const consumer = await jetstream(permit).consumers.get(`${ns}_TASKS`, taskConsumerName(a.queueId, 1));
    const delivery = await waitFor('the task delivered', async () => (await consumer.next({ expires: 2000 })) ?? undefined, 30_000, 0);
    const item = delivery.json<TaskItem>();
    expect(item).toMatchObject({ taskId, workspaceId: a.id, payload: { prompt: 'hi' } });
    const asMachine = new Messaging(machine, new Namespace(ns));
    const claim = {
      taskId,
      deploymentId: a.queueId,
      deploymentVersion: 1,
      workspaceId: a.id,
      machineId: 'm-int',
      containerId: 'c-int',
      attempt: 1,
    };
    await asMachine.publish(TASK_STARTED, { ...claim, startedAt: new Date().toISOString() });
    await asMachine.publish(TASK_COMPLETED, { ...claim, durationMs: 12, result: { answer: 42 }, completedAt: new Date().toISOString() });
    delivery.ack();

    const end = await waitFor(
      'task-ended heard',
      async () => ended.map((m) => m.json<{ taskId: string; state: string; workspaceId: string }>()).find((e) => e.taskId === taskId),
      30_000,
    );
    expect(end).toMatchObject({ taskId, workspaceId: a.id, state: 'COMPLETE' });
    expect((await call('GET', `/api/v1/tasks/${taskId}`, a.admin)).body).toMatchObject({ status: 'COMPLETE', result: { answer: 42 } });
  });

  it("answers a submit naming a queue its workspace does not have with the HTTP API's 404", async () => {
    const reply = await nc.request(`${ns}.workspace.${a.id}.task.submit.v1`, JSON.stringify({ queue: 'not-here' }), { timeout: 10_000 });
    expect(reply.headers?.get('Tern-Error-Code')).toBe('404');
    expect(reply.headers?.get('Tern-Error')).toMatch(/task queue "not-here" not found/);
  });

  it("is refused another workspace's subjects", async () => {
    await refused(nc, 'publish', `${ns}.workspace.${b.id}.task.submit.v1`, () =>
      nc.publish(`${ns}.workspace.${b.id}.task.submit.v1`, '{"queue":"q"}'),
    );
    for (const subject of [`${ns}.notify.task-ended.${b.id}.v1`, `${ns}.task.submitted.${b.id}.v1`, `${ns}.task.cancelled.*.v1`]) {
      await refused(nc, 'subscription', subject, () => nc.subscribe(subject));
    }
    expect(nc.isClosed()).toBe(false);
  });

  it('is refused everything else: machines, streams, buckets, the task queue itself, others replies', async () => {
    for (const subject of ['>', `${ns}.>`, `${ns}.task.*.completed.v1`, `${ns}.agent.m-int.invoke.*.v1`, '_INBOX.>']) {
      await refused(nc, 'subscription', subject, () => nc.subscribe(subject));
    }
    for (const subject of [
      `${ns}.tasks.${a.queueId}.1.v1`,
      `${ns}.task.m-int.completed.v1`,
      `$JS.API.STREAM.INFO.${ns}_TASKS`,
      `$JS.API.STREAM.DELETE.${ns}_EVENTS`,
      `$KV.${ns}_routes.c-int`,
      `${ns}.command.scale.${a.queueId}.v1`,
    ]) {
      await refused(nc, 'publish', subject, () => nc.publish(subject, '{}'));
    }
    expect(nc.isClosed()).toBe(false);
  });

  it('an events-only user may submit nothing', async () => {
    const file = join(dir, 'watcher.creds');
    const made = await tern(['nats', 'user', 'create', 'watcher', '--allow', 'events', '--out', file, '--json'], gateway.base, a.admin);
    expect(made).toMatchObject({ code: 0 });
    const watcher = await connectWith(file, (JSON.parse(made.stdout) as CreatedNatsUser).inboxPrefix);
    open.push(watcher);
    const subject = `${ns}.workspace.${a.id}.task.submit.v1`;
    await refused(watcher, 'publish', subject, () => watcher.publish(subject, '{"queue":"q"}'));
  });

  it('is disconnected at once when revoked, and cannot connect again', async () => {
    const closed = nc.closed();
    const revoked = await tern(['nats', 'user', 'revoke', user.id], gateway.base, a.admin);
    expect(revoked).toMatchObject({ code: 0 });
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      closed,
      new Promise((_, reject) => (timer = setTimeout(() => reject(new Error('still connected 5 s after revoke')), 5000))),
    ]);
    clearTimeout(timer);
    await expect(connectWith(credsFile, user.inboxPrefix)).rejects.toThrow(/Authorization Violation/);
    expect((await call('GET', '/api/v1/nats/users', a.admin)).body).toEqual(
      expect.arrayContaining([expect.objectContaining({ id: user.id, revokedAt: expect.any(String) })]),
    );
    // B's admin cannot see or revoke A's users.
    expect((await call('DELETE', `/api/v1/nats/users/${user.id}`, b.admin)).status).toBe(404);
  });
});
