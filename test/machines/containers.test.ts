import pg from 'pg';
import type { NatsConnection, Subscription } from '@nats-io/transport-node';
import {
  AGENT_CONTAINER_START,
  AGENT_CONTAINER_STOP,
  subjectFor,
  CONTAINER_FAILED,
  CONTAINER_READY,
  CONTAINER_SCHEDULED,
  CONTAINER_STARTED,
  CONTAINER_STARTING,
  CONTAINER_STOPPED,
  type ContainerStart,
  MACHINE_BEAT,
} from '#tern/contracts';
import { connectNats, Messaging, Namespace, RequestError } from '#tern/messaging';
import { AgentCommands } from '../../apps/scheduler/src/machines/agent-commands.js';
import { createTestSchema, TEST_NATS, type TestSchema, testEnv, uniqueName } from '../support/isolation.js';
import { deleteNamespaces } from '../support/nats.js';
import { freePort, ServiceProcess, waitFor } from '../support/processes.js';

/** The scheduler's side of container commands and lifecycle events: plumbing for placement. */
describe('agent commands and container lifecycle', () => {
  let schema: TestSchema;
  let ns: Namespace;
  let scheduler: ServiceProcess;
  let nc: NatsConnection;
  let messaging: Messaging;
  let db: pg.Client;
  let deploymentId: string;
  let workspaceId: string;
  const subs: Subscription[] = [];

  const at = (offsetMs = 0) => new Date(Date.parse('2026-01-01T00:00:00Z') + offsetMs).toISOString();
  const event = (containerId: string, offsetMs = 0) => ({
    containerId,
    deploymentId,
    deploymentVersion: 1,
    workspaceId,
    machineId: 'worker-1',
    at: at(offsetMs),
  });
  const resources = { cpuMillicores: 2000, memoryBytes: 4 * 1024 ** 3, gpuCount: 1, gpuType: 'H100' };
  const row = async (id: string) => (await db.query(`SELECT * FROM containers WHERE id = $1`, [id])).rows[0];

  beforeAll(async () => {
    schema = await createTestSchema('ctr');
    ns = new Namespace(uniqueName('ctr'));
    scheduler = new ServiceProcess('scheduler', testEnv(schema, ns.name, { HTTP_PORT: String(await freePort()) })).start();
    await scheduler.ready();
    nc = await connectNats({ ...TEST_NATS, name: 'containers-test' });
    messaging = new Messaging(nc, ns);
    db = new pg.Client({ connectionString: schema.url, options: `-c search_path=${schema.schema}` });
    await db.connect();
    await db.query(`INSERT INTO machines (id, pool, state) VALUES ('worker-1', 'default', 'ready')`);
    workspaceId = (await db.query(`INSERT INTO workspaces (name) VALUES ('acme') RETURNING id`)).rows[0].id;
    deploymentId = (
      await db.query(`INSERT INTO deployments (workspace_id, name, kind) VALUES ($1, 'llm', 'endpoint') RETURNING id`, [workspaceId])
    ).rows[0].id;
    // The version wants one container, so the scheduler's reconciler (running beside these tests)
    // keeps c-2 instead of stopping it as surplus; with no resolved spec it never places another.
    await db.query(`INSERT INTO deployment_versions (deployment_id, version, spec, desired_containers) VALUES ($1, 1, '{}', 1)`, [
      deploymentId,
    ]);
  });

  afterAll(async () => {
    subs.forEach((s) => s.unsubscribe());
    await scheduler?.stop();
    await db?.end();
    await nc?.close();
    await schema?.drop();
    await deleteNamespaces(ns.name);
  });

  it("sends start and stop to the named machine's agent and returns its typed reply", async () => {
    const received: { subject: string; containerId: string }[] = [];
    subs.push(
      messaging.serve(AGENT_CONTAINER_START, 'fake-agent', (cmd, subject) => {
        received.push({ subject, containerId: cmd.containerId });
        return cmd.resources.gpuCount > 4 ? { accepted: false, reason: 'not enough free GPUs' } : { accepted: true };
      }),
      messaging.serve(AGENT_CONTAINER_STOP, 'fake-agent', (cmd, subject) => {
        received.push({ subject, containerId: cmd.containerId });
        return { accepted: true };
      }),
    );
    const commands = new AgentCommands(messaging);
    const start: ContainerStart = {
      ...event('c-1'),
      deploymentKind: 'endpoint',
      image: 'ghcr.io/acme/llm:1',
      handler: 'app.py:predict',
      env: {},
      resources,
      volumes: [],
      ports: [8000],
      workers: 1,
      concurrency: 4,
      startupTimeoutSeconds: 300,
      requestedAt: at(),
    };
    const { machineId: _m, at: _a, ...startCommand } = start as ContainerStart & { machineId: string; at: string };

    expect(await commands.start('worker-1', startCommand)).toEqual({ accepted: true });
    expect(await commands.start('worker-1', { ...startCommand, resources: { ...resources, gpuCount: 8 } })).toEqual({
      accepted: false,
      reason: 'not enough free GPUs',
    });
    expect(await commands.stop('worker-1', { containerId: 'c-1', graceSeconds: 10, reason: 'scale-down' })).toEqual({ accepted: true });
    expect(received).toEqual([
      { subject: subjectFor(AGENT_CONTAINER_START, 'worker-1'), containerId: 'c-1' },
      { subject: subjectFor(AGENT_CONTAINER_START, 'worker-1'), containerId: 'c-1' },
      { subject: subjectFor(AGENT_CONTAINER_STOP, 'worker-1'), containerId: 'c-1' },
    ]);

    await expect(commands.start('worker-1', { ...startCommand, ports: [0] })).rejects.toThrow(
      /refusing to send an invalid tern\.agent\.\*\.container\.start\.v1 to worker-1: ports/,
    );
    subs.forEach((s) => s.unsubscribe());
    const nobody = await commands.stop('worker-1', { containerId: 'c-1', graceSeconds: 0, reason: 'x' }, 1000).catch((e: unknown) => e);
    expect(nobody).toBeInstanceOf(RequestError);
    expect((nobody as RequestError).code).toBe(503);
  });

  it('records lifecycle events in the containers table, moving only forward', async () => {
    await messaging.publish(CONTAINER_SCHEDULED, { ...event('c-2'), resources, reason: 'scale-up' });
    await messaging.publish(CONTAINER_STARTING, event('c-2', 100));
    await messaging.publish(CONTAINER_STARTED, { ...event('c-2', 2000), resources, startupLatencyMs: 1900 });
    await messaging.publish(CONTAINER_READY, { ...event('c-2', 5000), readyLatencyMs: 4900 });
    const running = await waitFor('running and ready', async () => {
      const r = await row('c-2');
      return r?.ready_at ? r : undefined;
    });
    expect(running).toMatchObject({
      state: 'running',
      machine_id: 'worker-1',
      requested: { cpuMillicores: 2000, memoryBytes: 4 * 1024 ** 3, gpuCount: 1, gpu: 'H100' },
      state_reason: null,
    });
    expect(running.started_at.toISOString()).toBe(at(2000));
    expect(running.ready_at.toISOString()).toBe(at(5000));

    // Late and repeated events change nothing.
    await messaging.publish(CONTAINER_STARTING, event('c-2', 100));
    await messaging.publish(CONTAINER_STARTED, { ...event('c-2', 2000), resources, startupLatencyMs: 1900 });
    await messaging.publish(CONTAINER_STOPPED, { ...event('c-2', 9000), exitCode: 137, oomKilled: true, reason: 'oom', signal: 'SIGKILL' });
    const stopped = await waitFor('stopped', async () => ((await row('c-2'))?.state === 'stopped' ? row('c-2') : undefined));
    expect(stopped).toMatchObject({ exit_code: 137, oom_killed: true, state_reason: 'oom (SIGKILL)' });
    expect(stopped.stopped_at.toISOString()).toBe(at(9000));
    expect(stopped.started_at.toISOString()).toBe(at(2000));
  });

  it('ends in failed whichever of stopped and failed arrives first, keeping the exit code and the earliest end', async () => {
    // Each event type has its own consumer, so the two orders below may each be handled either way round.
    await messaging.publish(CONTAINER_FAILED, { ...event('c-3', 3000), phase: 'runtime', error: 'segfault' });
    await messaging.publish(CONTAINER_STOPPED, { ...event('c-3', 3001), exitCode: 139, oomKilled: false, reason: 'exited' });
    await messaging.publish(CONTAINER_STOPPED, { ...event('c-5', 3001), exitCode: 139, oomKilled: false, reason: 'exited' });
    await messaging.publish(CONTAINER_FAILED, { ...event('c-5', 3000), phase: 'runtime', error: 'segfault' });
    for (const id of ['c-3', 'c-5']) {
      const failed = await waitFor(`${id} failed with exit code`, async () => {
        const r = await row(id);
        return r?.exit_code === 139 && r.state === 'failed' ? r : undefined;
      });
      expect(failed).toMatchObject({ state_reason: 'runtime: segfault', requested: {} });
      expect(failed.stopped_at.toISOString()).toBe(at(3000));
    }
  });

  it('rejects, with a logged reason, an event for a deployment version it does not know', async () => {
    await messaging.publish(CONTAINER_STARTING, { ...event('c-4'), deploymentId: 'no-such-deployment' });
    const rejected = await scheduler.waitForLog(/handler rejected message/);
    expect(String(rejected.reason)).toBe('container c-4: starting event for unknown deployment no-such-deployment version 1');
    expect(await row('c-4')).toBeUndefined();
  });

  it('tells an agent to stop the containers it runs that the scheduler has given up, leaving the rest', async () => {
    await db.query(`INSERT INTO machines (id, pool, state) VALUES ('worker-2', 'default', 'ready')`);
    const versionId = (await db.query(`SELECT id FROM deployment_versions WHERE deployment_id = $1`, [deploymentId])).rows[0].id;
    await db.query(
      `INSERT INTO containers (id, deployment_version_id, machine_id, state, requested) VALUES ('c-live', $1, 'worker-2', 'running', '{}')`,
      [versionId],
    );
    // Wanted by the reconciler too, so only the heartbeat check could stop anything here.
    await db.query(`UPDATE deployment_versions SET desired_containers = 1, desired_at = now() WHERE id = $1`, [versionId]);
    const stopped: string[] = [];
    subs.splice(0).forEach((s) => s.unsubscribe());
    subs.push(
      messaging.serve(
        AGENT_CONTAINER_STOP,
        'worker-2-agent',
        (cmd) => {
          stopped.push(cmd.containerId);
          return { accepted: true };
        },
        ['worker-2'],
      ),
    );
    const beat = {
      machineId: 'worker-2',
      pool: 'default',
      sentAt: new Date().toISOString(),
      sequence: 1,
      cpuPercent: 1,
      memoryPercent: 1,
      gpus: [],
      runningContainers: ['c-live', 'c-ghost', 'c-3'],
    };
    messaging.emit(MACHINE_BEAT, beat, ['worker-2']);
    await waitFor('the stop of the given-up container', async () => stopped.length === 1);
    // c-3 failed on another machine; c-live is wanted; c-ghost was never the scheduler's.
    await new Promise((r) => setTimeout(r, 500));
    expect(stopped).toEqual(['c-3']);
    // Not repeated on the next beat: one stop per container per half minute.
    messaging.emit(MACHINE_BEAT, { ...beat, sequence: 2, sentAt: new Date().toISOString() }, ['worker-2']);
    await new Promise((r) => setTimeout(r, 1000));
    expect(stopped).toHaveLength(1);
  });
});
