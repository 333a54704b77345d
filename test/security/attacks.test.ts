import { createHash } from 'node:crypto';
import { jetstream } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import {
  AGENT_CONTAINER_START,
  agentResultPath,
  agentTaskPermitPath,
  CONTAINER_STARTED,
  HEARTBEATS_BUCKET,
  INVOKE,
  MACHINE_BEAT,
  MACHINE_STATE_CHANGED,
  SCALE_COMMAND,
  subjectFor,
  TASK_COMPLETED,
  TASK_ITEM,
  TaskItem,
  taskConsumerName,
} from '#tern/contracts';
import { bodyObjectName, connectNats, decode, Messaging, Namespace, putBody } from '#tern/messaging';
import { formatCreds, inboxPrefix } from '#tern/nats-auth';
import { ContainersRepository, createDataSource, TasksRepository } from '#tern/persistence';
import type { DataSource } from 'typeorm';
import { runningGateway } from '../support/gateway.js';
import { TEST_NATS, TEST_NATS_URL, testEnv } from '../support/isolation.js';
import { counterValue } from '../support/metrics.js';
import { connectAs, refused } from '../support/nats-users.js';
import { freePort, ServiceProcess, waitFor } from '../support/processes.js';
import { ADMIN, client, joinWithKey } from '../machines/harness.js';

/**
 * A stranger's machine, joined with a join token and its own NATS key like any agent, tries every
 * attack of issue 11 with the credentials it was given; each case asserts the refusal itself (the
 * server's permissions violation, the gateway's 403/404, the control plane's drop counter).
 *
 * Covered elsewhere, with the harness publishing on a machine's own subjects (what its NATS user
 * may do): a PENDING task completed by a machine placed for its queue, a task.started from a
 * container not placed for it and a resultRef naming another task's result
 * (test/security/task-leases.test.ts); events about containers never placed, and usage clamped to
 * the placement and to when NATS saw the stop (test/security/metering-placement.test.ts); a user
 * signed by an untrusted key, and a machine user that expires (test/messaging/nats-auth.test.ts);
 * deleting a machine revokes it (test/machines/nats-users.test.ts).
 */
describe('a joined machine attacking the installation', () => {
  const gateway = runningGateway('attacks', ADMIN);
  const call = (...args: Parameters<ReturnType<typeof client>>) => client(gateway.base)(...args);
  let ns: string;
  let db: DataSource;
  let containers: ContainersRepository;
  let metering: ServiceProcess;
  let meteringPort: number;
  let harness: NatsConnection;
  let harnessMessaging: Messaging;
  /** The attacker: its machine token, its NATS key and its connection as its own user. */
  const attacker = { id: 'm-attacker', token: '', seed: '', jwt: '' };
  let nc: NatsConnection;
  let messaging: Messaging;
  const open: NatsConnection[] = [];
  const tokens: Record<string, string> = {};
  const bundles = { victim: Buffer.from("the victim's code"), own: Buffer.from("the attacker's own code") };
  const digests = {
    victim: `sha256:${createHash('sha256').update(bundles.victim).digest('hex')}`,
    own: `sha256:${createHash('sha256').update(bundles.own).digest('hex')}`,
  };
  /** Deployments placed on the victim machine, and the attacker's own task queue. */
  const placed: Record<string, { deploymentId: string; workspaceId: string; containerId: string }> = {};

  /** A new machine joining with a key pair of its own, as tern-agent does. */
  const join = async (machineId: string) => {
    const { key, body, jwt } = await joinWithKey(gateway.base, ADMIN, 'attacks', machineId);
    tokens[machineId] = body.machineToken as string;
    return { token: body.machineToken as string, seed: key.seed, jwt };
  };
  const connectMachine = async (machineId: string, jwt: string, seed: string) => {
    const conn = await connectAs(formatCreds(jwt, seed), inboxPrefix(ns, 'agent', machineId));
    open.push(conn);
    return conn;
  };

  /** A deployment with one container placed on `machineId`, as the scheduler records it. */
  const deployAndPlace = async (name: string, kind: 'endpoint' | 'task_queue', containerId: string, machineId: string) => {
    const code = machineId === 'm-victim' ? digests.victim : digests.own;
    const deployed = await call('POST', '/api/v1/deployments', ADMIN, { name, kind, handler: 'app.py:f', code });
    expect(deployed.status).toBe(201);
    const deploymentId = deployed.body.deploymentId as string;
    const [version] = (await db.query(
      `SELECT dv.id, d.workspace_id::text AS "workspaceId" FROM deployment_versions dv JOIN deployments d ON d.id = dv.deployment_id
       WHERE dv.deployment_id = $1`,
      [deploymentId],
    )) as { id: string; workspaceId: string }[];
    await containers.insertScheduled({
      id: containerId,
      deploymentVersionId: version.id,
      machineId,
      reason: 'test placement',
      requested: { cpuMillicores: 250, memoryBytes: 128 * 2 ** 20, gpuCount: 0 },
    });
    placed[name] = { deploymentId, workspaceId: version.workspaceId, containerId };
    return placed[name];
  };
  /** A task of the victim's queue, started (leased) on the victim's container. */
  const victimTaskStarted = async () => {
    const taskId = await submit('victim-queue');
    await new TasksRepository(db).markStarted({
      taskId,
      attempt: 1,
      startedAt: new Date().toISOString(),
      containerId: 'c-victim-queue',
      machineId: 'm-victim',
    });
    return taskId;
  };
  const submit = async (queue: string) => {
    const submitted = await call('POST', `/taskqueue/${queue}`, ADMIN, { secret: `payload of ${queue}` });
    expect(submitted.status).toBe(202);
    return submitted.body.task_id as string;
  };

  beforeAll(async () => {
    ns = gateway.namespace;
    db = await createDataSource({ url: gateway.schema.url, schema: gateway.schema.schema, runMigrations: false }).initialize();
    containers = new ContainersRepository(db);
    meteringPort = await freePort();
    metering = new ServiceProcess('metering', testEnv(gateway.schema, ns, { HTTP_PORT: String(meteringPort) })).start();
    harness = await connectNats({ ...TEST_NATS, name: 'attacks-test' });
    harnessMessaging = new Messaging(harness, new Namespace(ns));
    expect((await call('POST', '/api/v1/pools', ADMIN, { name: 'attacks' })).status).toBe(201);
    for (const which of ['victim', 'own'] as const) {
      const put = await fetch(`${gateway.base}/api/v1/code/${digests[which]}`, {
        method: 'PUT',
        headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/gzip' },
        body: bundles[which],
      });
      expect(put.status).toBe(201);
    }
    Object.assign(attacker, await join('m-attacker'));
    await join('m-victim');
    await deployAndPlace('victim-app', 'endpoint', 'c-victim-app', 'm-victim');
    await deployAndPlace('victim-queue', 'task_queue', 'c-victim-queue', 'm-victim');
    await deployAndPlace('own-queue', 'task_queue', 'c-own-queue', 'm-attacker');
    nc = await connectMachine(attacker.id, attacker.jwt, attacker.seed);
    messaging = new Messaging(nc, new Namespace(ns), inboxPrefix(ns, 'agent', attacker.id), false);
    await metering.ready();
  }, 120_000);

  afterAll(async () => {
    await Promise.all(open.map((c) => c.close().catch(() => undefined)));
    await harness?.close();
    await metering?.stop();
    await db?.destroy();
  });

  const wire = (subject: string) => `${ns}${subject.slice('tern'.length)}`;
  const refusedSub = (subject: string) => refused(nc, 'subscription', subject, () => nc.subscribe(subject));
  const refusedPub = (subject: string, data = '{}') => refused(nc, 'publish', subject, () => nc.publish(subject, data));

  it('is refused an anonymous connection', async () => {
    await expect(connect({ servers: TEST_NATS_URL, reconnect: false })).rejects.toThrow(/Authorization Violation/);
  });

  it("cannot hear everything, another machine's commands, invokes and state, or anybody's tasks", async () => {
    await refusedSub('>');
    await refusedSub(`${ns}.>`);
    await refusedSub(wire(subjectFor(AGENT_CONTAINER_START, 'm-victim')));
    await refusedSub(wire(subjectFor(INVOKE, 'm-victim', 'c-victim-app')));
    await refusedSub(wire(subjectFor(MACHINE_STATE_CHANGED, 'm-victim')));
    // Beats are core NATS now: hearing them (any machine's, or its own) is the scheduler's and reputation's only.
    await refusedSub(wire(MACHINE_BEAT.subject));
    await refusedSub(wire(subjectFor(MACHINE_BEAT, 'm-victim')));
    // Nor may it beat for another machine: its user publishes its own subject only.
    await refusedPub(wire(subjectFor(MACHINE_BEAT, 'm-victim')));
    // Task payloads are stored under their queue's subject: a core subscription would see every submit.
    await refusedSub(wire(subjectFor(TASK_ITEM, placed['victim-queue'].deploymentId, '1')));
    await refusedSub(wire(subjectFor(TASK_ITEM, placed['own-queue'].deploymentId, '1')));
    await refusedSub(`${inboxPrefix(ns, 'gateway')}.>`);
    // Another machine's heartbeat entry: only its own key may be read, as the agent reads it.
    // (The bucket as the scheduler creates it at start.)
    await harnessMessaging.kv({ name: HEARTBEATS_BUCKET.name, ttlMs: 30_000 });
    const heartbeats = await new Kvm(nc).open(harnessMessaging.ns.bucket(HEARTBEATS_BUCKET.name), { allow_direct: true });
    expect(await heartbeats.get(attacker.id)).toBeNull();
    await refusedPub(`$JS.API.DIRECT.GET.KV_${ns}_heartbeats.$KV.${ns}_heartbeats.m-victim`, '');
    await refusedPub(`$JS.API.STREAM.MSG.GET.KV_${ns}_heartbeats`, JSON.stringify({ last_by_subj: `$KV.${ns}_heartbeats.m-victim` }));
    expect(nc.isClosed()).toBe(false);
  });

  it('cannot read the object stores (request bodies, results, code, volume chunks) nor the stored events', async () => {
    for (const store of ['bodies', 'results', 'code', 'volume-chunks']) {
      await refusedPub(`$JS.API.STREAM.INFO.OBJ_${ns}_${store}`, '');
      await refusedPub(`$JS.API.CONSUMER.CREATE.OBJ_${ns}_${store}`);
      await refusedPub(`$JS.API.STREAM.MSG.GET.OBJ_${ns}_${store}`);
      await refusedSub(`$O.${ns}_${store}.>`);
    }
    await refusedPub(`$JS.API.STREAM.MSG.GET.${ns}_EVENTS`);
    await refusedPub(`$JS.API.CONSUMER.CREATE.${ns}_TASKS`);
  });

  it("is refused another tenant's code, request body and task result over the gateway's HTTPS", async () => {
    const code = (token: string, which: keyof typeof digests) =>
      fetch(`${gateway.base}/api/v1/agent/code/${digests[which]}`, { headers: { authorization: `Bearer ${token}` } });
    expect((await code(attacker.token, 'victim')).status).toBe(404);
    // Served to the machines it is placed on.
    expect((await code(tokens['m-victim'], 'victim')).status).toBe(200);
    expect((await code(attacker.token, 'own')).status).toBe(200);

    await putBody(harnessMessaging, bodyObjectName('m-victim', 'req-victim'), Buffer.alloc(2 * 2 ** 20, 1));
    const body = await fetch(`${gateway.base}/api/v1/agent/bodies/req-victim`, { headers: { authorization: `Bearer ${attacker.token}` } });
    expect(body.status).toBe(404);

    const taskId = await victimTaskStarted();
    const result = await fetch(`${gateway.base}${agentResultPath(taskId, 1)}`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${attacker.token}`, 'content-type': 'application/octet-stream' },
      body: JSON.stringify({ forged: true }),
    });
    expect(result.status).toBe(403);
  });

  it('cannot write the routes or reputation buckets, publish a scale command or delete a stream', async () => {
    await refusedPub(`$KV.${ns}_routes.c-victim-app`, JSON.stringify({ machineId: attacker.id }));
    await refusedPub(`$KV.${ns}_reputation.${attacker.id}`, JSON.stringify({ score: 1 }));
    await refusedPub(wire(subjectFor(SCALE_COMMAND, placed['victim-app'].deploymentId)));
    for (const stream of ['EVENTS', 'TASKS', 'COMMANDS', 'HEARTBEATS']) await refusedPub(`$JS.API.STREAM.DELETE.${ns}_${stream}`, '');
    await refusedPub(`$JS.API.STREAM.PURGE.${ns}_TASKS`, '');
    await refusedPub(`$JS.API.CONSUMER.DELETE.${ns}_TASKS.${taskConsumerName(placed['victim-queue'].deploymentId, 1)}`, '');
    // Nor speak for another machine.
    await refusedPub(wire(subjectFor(CONTAINER_STARTED, 'm-victim')));
  });

  it("pulls only its own queue's tasks, through a permit the gateway gives for versions placed on it", async () => {
    const stream = `${ns}_TASKS`;
    const own = taskConsumerName(placed['own-queue'].deploymentId, 1);
    const victims = taskConsumerName(placed['victim-queue'].deploymentId, 1);
    const mine = await submit('own-queue');
    await submit('victim-queue');
    // Its own NATS user pulls nothing, not even its own queue.
    await refusedPub(`$JS.API.CONSUMER.MSG.NEXT.${stream}.${victims}`);
    await refusedPub(`$JS.API.CONSUMER.MSG.NEXT.${stream}.${own}`);

    const permit = (deploymentId: string) =>
      fetch(`${gateway.base}${agentTaskPermitPath(deploymentId, 1)}`, { headers: { authorization: `Bearer ${attacker.token}` } });
    const theirs = await permit(placed['victim-queue'].deploymentId);
    expect(theirs.status).toBe(404);
    const ownPermit = await permit(placed['own-queue'].deploymentId);
    expect(ownPermit.status).toBe(200);
    const { jwt } = (await ownPermit.json()) as { jwt: string };
    const permitNc = await connectMachine(attacker.id, jwt, attacker.seed);

    const msg = await (await jetstream(permitNc).consumers.get(stream, own)).next({ expires: 10_000 });
    expect(msg).not.toBeNull();
    const item = await decode(TaskItem, msg!.data);
    expect(item.ok && item.value.taskId).toBe(mine);
    msg!.ack();

    // The permit is that one consumer: not the victim's, no stream read, no subject of its own.
    const next = `$JS.API.CONSUMER.MSG.NEXT.${stream}.${victims}`;
    await refused(permitNc, 'publish', next, () => permitNc.publish(next, JSON.stringify({ batch: 1 })));
    const info = `$JS.API.CONSUMER.INFO.${stream}.${victims}`;
    await refused(permitNc, 'publish', info, () => permitNc.publish(info));
    const get = `$JS.API.STREAM.MSG.GET.${stream}`;
    await refused(permitNc, 'publish', get, () => permitNc.publish(get, JSON.stringify({ seq: 1 })));
    for (const beat of [wire(`tern.heartbeat.${attacker.id}.v1`), wire(`tern.beat.${attacker.id}.v1`)])
      await refused(permitNc, 'publish', beat, () => permitNc.publish(beat, '{}'));
  });

  it('loses its task permits with its NATS user when it is revoked', async () => {
    const machine = await join('m-revoked');
    await deployAndPlace('revoked-queue', 'task_queue', 'c-revoked-queue', 'm-revoked');
    const answer = await fetch(`${gateway.base}${agentTaskPermitPath(placed['revoked-queue'].deploymentId, 1)}`, {
      headers: { authorization: `Bearer ${machine.token}` },
    });
    expect(answer.status).toBe(200);
    const permitNc = await connectMachine('m-revoked', ((await answer.json()) as { jwt: string }).jwt, machine.seed);
    const mainNc = await connectMachine('m-revoked', machine.jwt, machine.seed);
    const revoked = Date.now();
    expect((await call('POST', '/api/v1/machines/m-revoked/revoke', ADMIN)).status).toBe(204);
    const closedWithin5s = (c: NatsConnection) =>
      Promise.race([c.closed().then(() => 'closed'), new Promise((r) => setTimeout(() => r('still open'), 5000))]);
    expect(await Promise.all([closedWithin5s(permitNc), closedWithin5s(mainNc)])).toEqual(['closed', 'closed']);
    expect(Date.now() - revoked).toBeLessThan(6000);
    // And no new permit: its machine token is void.
    const again = await fetch(`${gateway.base}${agentTaskPermitPath(placed['revoked-queue'].deploymentId, 1)}`, {
      headers: { authorization: `Bearer ${machine.token}` },
    });
    expect(again.status).toBe(401);
  });

  it('has a task.completed for a task leased to another machine dropped and counted', async () => {
    const taskId = await victimTaskStarted();
    const { deploymentId, workspaceId } = placed['victim-queue'];
    const counter = (name: string, labels: Record<string, string>) => counterValue(gateway.base, name, labels);
    const notHolder = await counter('tern_task_events_refused_total', { reason: 'not-lease-holder' });
    const mismatch = await counter('tern_messages_machine_mismatch_total', { subject: TASK_COMPLETED.subject });
    const completion = {
      taskId,
      deploymentId,
      deploymentVersion: 1,
      workspaceId,
      containerId: 'c-victim-queue',
      attempt: 1,
      durationMs: 5,
      result: { forged: true },
      completedAt: new Date().toISOString(),
    };
    // In its own name (all NATS lets it publish) ...
    await messaging.publish(TASK_COMPLETED, { ...completion, machineId: attacker.id });
    // ... and in the lease holder's name, on its own subject.
    await messaging.publish(TASK_COMPLETED, { ...completion, machineId: 'm-victim' }, { tokens: [attacker.id] });
    await waitFor(
      'both refusals counted',
      async () =>
        (await counter('tern_task_events_refused_total', { reason: 'not-lease-holder' })) === notHolder + 1 &&
        (await counter('tern_messages_machine_mismatch_total', { subject: TASK_COMPLETED.subject })) === mismatch + 1,
      20_000,
      200,
    );
    const [row] = (await db.query(`SELECT state, result FROM tasks WHERE id = $1`, [taskId])) as { state: string; result: unknown }[];
    expect(row).toEqual({ state: 'RUNNING', result: null });
  });

  it("has container.started for another workspace's container refused, and its own backdated, upsized start metered as placed", async () => {
    const refusedBy = (reason: string) =>
      counterValue(`http://127.0.0.1:${meteringPort}`, 'tern_metering_events_refused_total', { reason });
    const before = await refusedBy('other-machine');
    const victim = placed['victim-app'];
    const claim = { resources: { cpuMillicores: 64_000, memoryBytes: 2 ** 40, gpuCount: 8, gpuType: 'H100' }, startupLatencyMs: 1 };
    await messaging.publish(CONTAINER_STARTED, {
      containerId: victim.containerId,
      deploymentId: victim.deploymentId,
      deploymentVersion: 1,
      workspaceId: victim.workspaceId,
      machineId: attacker.id,
      at: new Date().toISOString(),
      ...claim,
    });
    await waitFor('the refusal counted', async () => (await refusedBy('other-machine')) === before + 1, 20_000, 200);

    // Its own container, claimed for another workspace, 8 GPUs, started a month ago.
    const own = placed['own-queue'];
    const [{ placedAt }] = (await db.query(`SELECT created_at AS "placedAt" FROM containers WHERE id = $1`, [own.containerId])) as {
      placedAt: Date;
    }[];
    await messaging.publish(CONTAINER_STARTED, {
      containerId: own.containerId,
      deploymentId: victim.deploymentId,
      deploymentVersion: 1,
      workspaceId: '00000000-0000-4000-8000-000000000001',
      machineId: attacker.id,
      at: new Date(Date.now() - 30 * 24 * 3600_000).toISOString(),
      ...claim,
    });
    const row = await waitFor('metered as placed', async () => {
      const [r] = (await db.query(`SELECT * FROM metered_containers WHERE container_id = $1`, [own.containerId])) as Record<
        string,
        unknown
      >[];
      return r?.started_at ? r : undefined;
    });
    expect(row).toMatchObject({ workspace_id: own.workspaceId, deployment_id: own.deploymentId, gpu_count: 0, cpu_millicores: 250 });
    expect((row.started_at as Date).getTime()).toBeGreaterThanOrEqual(placedAt.getTime() - 1000);
  });
});
