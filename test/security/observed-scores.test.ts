import { readFileSync } from 'node:fs';
import { connect, credsAuthenticator, type NatsConnection } from '@nats-io/transport-node';
import { CONTAINER_READY, CONTAINER_SCHEDULED, TASK_COMPLETED, TASK_STARTED } from '#tern/contracts';
import { Messaging } from '#tern/messaging';
import { inboxPrefix } from '#tern/nats-auth';
import { DEFAULT_PARAMS, type MachineRecord, meanLatency } from '#tern/reputation';
import { testEnv, TEST_NATS_URL } from '../support/isolation.js';
import { counterValue } from '../support/metrics.js';
import { machineCreds, refused, serviceCredsFile } from '../support/nats-users.js';
import { freePort, ServiceProcess, waitFor } from '../support/processes.js';
import { TaskLedger } from '../support/task-ledger.js';

const enc = new TextEncoder();
const DAY_MS = 86_400_000;

/**
 * A machine's word against what the control plane observed: a start it says was instant, a task
 * it says ran a day and ended tomorrow, a task it never held. Metering and reputation keep what
 * the control plane saw (the scheduler's command, the gateway's lease, when events reached NATS).
 */
describe('metering and reputation score what the control plane observed', () => {
  let ledger: TaskLedger;
  let metering: ServiceProcess;
  let reputation: ServiceProcess;
  let reputationPort: number;
  let machine: NatsConnection;
  let asMachine: Messaging;
  const open: NatsConnection[] = [];

  beforeAll(async () => {
    // c-1 runs the queue on m-1 (the liar); m-2 joined and holds nothing.
    ledger = await TaskLedger.start('observed', { 'm-1': 'c-1' });
    await ledger.addMachine('m-2');
    const env = (port: number) =>
      testEnv(ledger.schema, ledger.ns.name, { HTTP_PORT: String(port), METERING_CHECKPOINT_INTERVAL_MS: '200' });
    metering = new ServiceProcess('metering', env(await freePort())).start();
    reputationPort = await freePort();
    reputation = new ServiceProcess('reputation', { ...env(reputationPort), REPUTATION_RECOMPUTE_INTERVAL_MS: '300' }).start();
    await Promise.all([metering.ready(), reputation.ready()]);
    machine = await connect({
      servers: TEST_NATS_URL,
      authenticator: credsAuthenticator(enc.encode(await machineCreds(ledger.ns.name, 'm-1'))),
      inboxPrefix: inboxPrefix(ledger.ns.name, 'agent', 'm-1'),
      reconnect: false,
    });
    open.push(machine);
    asMachine = new Messaging(machine, ledger.ns);
  });

  afterAll(async () => {
    await Promise.all(open.map((c) => c.close().catch(() => undefined)));
    await Promise.all([metering?.stop(), reputation?.stop()]);
    await ledger?.stop();
  });

  const meteredTask = async (taskId: string) =>
    (
      await ledger.db.query(
        `SELECT outcome, machine_id, workspace_id, duration_ms::float8 AS duration_ms, started_at, ended_at FROM metered_tasks WHERE task_id = $1`,
        [taskId],
      )
    ).rows;
  const reputationRecord = async (machineId: string): Promise<MachineRecord | undefined> =>
    (await ledger.db.query(`SELECT record FROM reputation_machines WHERE machine_id = $1`, [machineId])).rows[0]?.record;
  const taskAttempts = (r: MachineRecord | undefined) => Object.values(r?.tasks ?? {}).reduce((n, t) => n + t.attempts.v, 0);
  const claim = (taskId: string, machineId: string) => ({
    taskId,
    deploymentId: ledger.deploymentId,
    deploymentVersion: 1,
    workspaceId: ledger.workspaceId,
    machineId,
    containerId: 'c-1',
    attempt: 1,
  });

  it('meters and scores a task from its observed lease, not its claimed day-long run', async () => {
    const id = await ledger.task();
    const monthAgo = new Date(Date.now() - 30 * DAY_MS).toISOString();
    const before = Date.now();
    await asMachine.publish(TASK_STARTED, { ...claim(id, 'm-1'), startedAt: monthAgo });
    await waitFor('the lease of m-1', async () => (await ledger.row(id)).state === 'RUNNING');
    await asMachine.publish(TASK_COMPLETED, {
      ...claim(id, 'm-1'),
      durationMs: DAY_MS,
      result: { ok: true },
      completedAt: new Date(Date.now() + DAY_MS).toISOString(),
    });
    const after = Date.now();
    const [row] = await waitFor('metered', async () => {
      const rows = await meteredTask(id);
      return rows[0]?.outcome === 'completed' ? rows : undefined;
    });
    expect(row).toMatchObject({ machine_id: 'm-1', workspace_id: ledger.workspaceId });
    // Started when the start reached NATS (not a month back), ended by when the outcome did (not tomorrow).
    expect(row.started_at.getTime()).toBeGreaterThanOrEqual(before - 1000);
    expect(row.ended_at.getTime()).toBeLessThanOrEqual(after + 1000);
    expect(row.duration_ms).toBeLessThanOrEqual(after - before + 1000);
    expect(row.duration_ms).toBe(row.ended_at.getTime() - row.started_at.getTime());
    await waitFor('the outcome scored on m-1', async () => Math.round(taskAttempts(await reputationRecord('m-1'))) === 1);
  });

  it('neither meters nor scores an outcome from a machine without the lease', async () => {
    const id = await ledger.task();
    await asMachine.publish(TASK_STARTED, { ...claim(id, 'm-1'), startedAt: new Date().toISOString() });
    await waitFor('the lease of m-1', async () => (await ledger.row(id)).state === 'RUNNING');
    const refusals = () =>
      counterValue(`http://127.0.0.1:${ledger.port}`, 'tern_task_events_refused_total', { reason: 'not-lease-holder' });
    const refusedBefore = await refusals();
    // m-2 claims m-1's task (through the harness, on m-2's own subject, as its permissions allow).
    await ledger.messaging.publish(TASK_COMPLETED, {
      ...claim(id, 'm-2'),
      durationMs: DAY_MS,
      result: { forged: true },
      completedAt: new Date().toISOString(),
    });
    await waitFor('the gateway refused it', async () => (await refusals()) === refusedBefore + 1, 15_000);
    expect(await meteredTask(id)).toEqual([]);
    expect(await reputationRecord('m-2')).toBeUndefined();
    // Metering and reputation cannot even hear agents' task events: only the gateway's account.
    for (const service of ['metering', 'reputation']) {
      const nc = await connect({
        servers: TEST_NATS_URL,
        authenticator: credsAuthenticator(readFileSync(serviceCredsFile(service, ledger.ns.name))),
        inboxPrefix: inboxPrefix(ledger.ns.name, service as 'metering'),
        reconnect: false,
      });
      open.push(nc);
      const subject = `${ledger.ns.name}.task.m-2.completed.v1`;
      await refused(nc, 'subscription', subject, () => nc.subscribe(subject));
    }
  });

  it('times a start from the scheduler command to the observed ready, whatever latency the machine claims', async () => {
    const ids = {
      containerId: 'c-fast',
      deploymentId: ledger.deploymentId,
      deploymentVersion: 1,
      workspaceId: ledger.workspaceId,
      machineId: 'm-1',
    };
    const commandAt = new Date();
    await ledger.messaging.publish(CONTAINER_SCHEDULED, {
      ...ids,
      at: commandAt.toISOString(),
      resources: { cpuMillicores: 1000, memoryBytes: 2 ** 30, gpuCount: 0 },
      reason: 'scale-up',
    });
    await new Promise((r) => setTimeout(r, 2000));
    // The machine claims a 1 ms start, dated at the command.
    await asMachine.publish(CONTAINER_READY, { ...ids, at: commandAt.toISOString(), readyLatencyMs: 1 });
    const record = await waitFor('the start scored', async () => {
      const r = await reputationRecord('m-1');
      return r?.latency ? r : undefined;
    });
    const mean = meanLatency(record.latency, Date.now(), DEFAULT_PARAMS)!.meanMs;
    expect(mean).toBeGreaterThanOrEqual(1900);
    expect(mean).toBeLessThan(60_000);
  });

  it('counts no start for a ready of a container the scheduler never commanded that machine to start', async () => {
    const refusals = () =>
      counterValue(`http://127.0.0.1:${reputationPort}`, 'tern_reputation_readies_refused_total', { reason: 'not-commanded' });
    const before = await refusals();
    const startsBefore = JSON.stringify((await reputationRecord('m-1'))?.starts ?? {});
    await asMachine.publish(CONTAINER_READY, {
      containerId: 'c-never-placed',
      deploymentId: 'dep-other',
      deploymentVersion: 1,
      workspaceId: ledger.workspaceId,
      machineId: 'm-1',
      at: new Date().toISOString(),
      readyLatencyMs: 1,
    });
    // Waited for (its command may be behind it), then refused.
    await waitFor('the refusal counted', async () => (await refusals()) === before + 1, 90_000, 500);
    expect(JSON.stringify((await reputationRecord('m-1'))?.starts ?? {})).toBe(startsBefore);
  }, 120_000);
});
