import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { connect, credsAuthenticator, type NatsConnection } from '@nats-io/transport-node';
import {
  MACHINE_HEARTBEAT,
  REPUTATION_LEADER_BUCKET,
  TASK_ATTEMPT_ENDED,
  TASK_ATTEMPTS_ENDED,
  type TaskAttemptEnded,
  type TaskAttemptsEnded,
} from '#tern/contracts';
import { HOUR_MS, hourFloor } from '#tern/metering';
import { Messaging, Namespace } from '#tern/messaging';
import { inboxPrefix } from '#tern/nats-auth';
import { applyTaskOutcome, DEFAULT_PARAMS, type MachineRecord, newMachineRecord, taskFailureOutcome, valueAt } from '#tern/reputation';
import {
  appliedAll,
  expectedUsage,
  HEARTBEAT_TTL_SECONDS,
  makeScenario,
  placeScenario,
  progress,
  type ScenarioEvent,
} from '../metering/scenario.js';
import { createTestSchema, type TestSchema, testEnv, uniqueName } from '../support/isolation.js';
import { NatsCluster } from '../support/nats-cluster.js';
import { machineCreds } from '../support/nats-users.js';
import { freePort, ServiceProcess, waitFor } from '../support/processes.js';

/**
 * Past one server: a 3-node cluster with a leaf node for a remote site. The control plane
 * (two reputation replicas here, the heartbeats' consumer) declares its streams and buckets with
 * NATS_REPLICAS=3; a machine at the remote site, connected to the leaf with its own user,
 * heartbeats through it; a kill -9 of the server leading the heartbeats' stream loses no beat.
 */
describe('a 3-node NATS cluster with a leaf node for a remote site', () => {
  let cluster: NatsCluster;
  let schema: TestSchema;
  let db: pg.Client;
  let ns: Namespace;
  let nc: NatsConnection;
  let site: NatsConnection | undefined;
  const services: ServiceProcess[] = [];

  beforeAll(async () => {
    cluster = await NatsCluster.start(3);
    schema = await createTestSchema('cluster');
    ns = new Namespace(uniqueName('cluster'));
    nc = await cluster.connect();
    db = new pg.Client({ connectionString: schema.url, options: `-c search_path=${schema.schema}` });
    await db.connect();
  });

  afterAll(async () => {
    for (const s of services) await s.stop();
    await site?.close();
    await nc?.close();
    await db?.end();
    await schema?.drop();
    await cluster?.stop();
  });

  it('keeps R3 streams and every heartbeat of a leaf-connected machine through a kill -9 of a server', async () => {
    for (let i = 0; i < 2; i++) {
      const env = testEnv(schema, ns.name, { NATS_URL: cluster.urls.join(','), NATS_REPLICAS: '3', HTTP_PORT: String(await freePort()) });
      const service = new ServiceProcess('reputation', env).start();
      services.push(service);
      await service.ready();
    }
    const messaging = new Messaging(nc, ns);
    const jsm = await messaging.jsm();
    for (const stream of [ns.stream('HEARTBEATS'), ns.stream('EVENTS'), `KV_${ns.bucket(REPUTATION_LEADER_BUCKET.name)}`]) {
      const info = await jsm.streams.info(stream);
      expect([stream, info.config.num_replicas, info.cluster?.replicas?.length]).toEqual([stream, 3, 2]);
    }

    // A machine at the remote site knows only the leaf, and is there as itself.
    const machineId = 'm-site';
    const inbox = inboxPrefix(ns.name, 'agent', machineId);
    site = await connect({
      servers: cluster.leaf.url,
      authenticator: credsAuthenticator(new TextEncoder().encode(await machineCreds(ns.name, machineId))),
      inboxPrefix: inbox,
    });
    const agent = new Messaging(site, ns, inbox, false);
    const beat = (sequence: number) =>
      agent.publish(
        MACHINE_HEARTBEAT,
        {
          machineId,
          pool: 'default',
          sentAt: new Date().toISOString(),
          sequence,
          cpuPercent: 1,
          memoryPercent: 1,
          gpus: [],
          runningContainers: [],
        },
        { tokens: [machineId], msgId: `${machineId}-boot-${sequence}`, timeoutMs: 2000 },
      );
    const lastStored = async () =>
      (await db.query(`SELECT heartbeats FROM reputation_machines WHERE machine_id = $1`, [machineId])).rows[0]?.heartbeats
        ?.lastSequence as number | undefined;
    for (let sequence = 1; sequence <= 10; sequence++) await beat(sequence);
    await waitFor('the first beats stored by reputation', async () => (await lastStored()) === 10);

    const leaderName = (await jsm.streams.info(ns.stream('HEARTBEATS'))).cluster!.leader!;
    const victim = cluster.nodes.find((n) => n.name === leaderName)!;
    const killedAt = Date.now();
    await victim.kill();
    // Each beat is sent until the cluster acknowledges it (the agent's own retry); the message
    // id keeps a beat stored once even when an ack was lost with the server.
    let firstAckAfterKillMs: number | undefined;
    for (let sequence = 11; sequence <= 30; sequence++) {
      await waitFor(`beat ${sequence} acknowledged`, () => beat(sequence).then(() => true), 30_000, 250);
      firstAckAfterKillMs ??= Date.now() - killedAt;
    }
    const newLeader = (await jsm.streams.info(ns.stream('HEARTBEATS'))).cluster!.leader;
    expect(newLeader).not.toBe(leaderName);
    await waitFor('every beat stored by reputation after the kill', async () => (await lastStored()) === 30, 60_000);
    console.log(
      `NATS cluster: killed ${leaderName} (leader of HEARTBEATS, new leader ${newLeader}); the first beat after it stored in the stream ` +
        `${firstAckAfterKillMs} ms later, the last one applied by reputation ${Date.now() - killedAt} ms later`,
    );
    const stream = await jsm.streams.info(ns.stream('HEARTBEATS'));
    expect(stream.state.messages).toBe(30);

    // The killed server comes back on its store and catches up.
    victim.start();
    await cluster.ready();
    await waitFor(
      'the restarted server current again',
      async () => {
        const info = await jsm.streams.info(ns.stream('HEARTBEATS'));
        return info.cluster?.replicas?.length === 2 && info.cluster.replicas.every((r) => r.current) ? info : undefined;
      },
      30_000,
    );
  }, 180_000);

  it('metering and reputation, two replicas each at R3, count every event once through a kill -9 of a NATS server and of one replica each', async () => {
    // Each test starts from a whole cluster, even after one that failed before restarting its victim.
    for (const node of cluster.nodes) if (!node.running) node.start();
    await cluster.ready();
    const faultsSchema = await createTestSchema('faults');
    const faults = new Namespace(uniqueName('faults'));
    const fdb = new pg.Client({ connectionString: faultsSchema.url, options: `-c search_path=${faultsSchema.schema}` });
    await fdb.connect();
    try {
      const base = hourFloor(Date.now()) - 6 * HOUR_MS;
      const { events, containers, tasks } = makeScenario(base, [randomUUID(), randomUUID()], 200, 19);
      const start = async (name: string) => {
        const env = testEnv(faultsSchema, faults.name, {
          NATS_URL: cluster.urls.join(','),
          NATS_REPLICAS: '3',
          HTTP_PORT: String(await freePort()),
          METERING_CHECKPOINT_INTERVAL_MS: '200',
          MACHINE_HEARTBEAT_TTL_SECONDS: String(HEARTBEAT_TTL_SECONDS),
        });
        const service = new ServiceProcess(name, env).start();
        services.push(service);
        await service.ready();
        return service;
      };
      const [meteringA] = [await start('metering'), await start('metering')];
      const [reputationA] = [await start('reputation'), await start('reputation')];
      await placeScenario(fdb, containers);
      const messaging = new Messaging(nc, faults);
      // As a publisher does: each event sent until the cluster acknowledges it; its message id
      // keeps it stored once when an acknowledgement was lost with a server.
      const publish = async (batch: readonly ScenarioEvent[]) => {
        for (const e of batch)
          await waitFor(
            `${e.msgId} acknowledged`,
            () => messaging.publish(e.contract, e.payload, { msgId: e.msgId, timeoutMs: 2000 }).then(() => true),
            30_000,
            250,
          );
      };
      const half = Math.floor(events.length / 2);
      await publish(events.slice(0, half));
      await waitFor('metering applying', async () => (await progress(fdb)).containers > 0 || undefined);

      const leaderName = (await (await messaging.jsm()).streams.info(faults.stream('EVENTS'))).cluster!.leader!;
      const victim = cluster.nodes.find((n) => n.name === leaderName)!;
      const killedAt = Date.now();
      await Promise.all([victim.kill(), meteringA.kill('SIGKILL'), reputationA.kill('SIGKILL')]);
      await publish(events.slice(half));
      const publishedAfterKillMs = Date.now() - killedAt;

      const done = await waitFor('metering exact after the faults', () => appliedAll(fdb, { containers, tasks }), 90_000);
      const byMachine = await fdb.query(`SELECT machine_id AS key, SUM(seconds)::float8 AS seconds FROM usage_intervals GROUP BY 1`);
      const truth = expectedUsage(containers, (c) => c.machineId);
      for (const r of byMachine.rows) expect(r.seconds).toBeCloseTo(truth.get(r.key)!.seconds, 6);
      const taskRows = await fdb.query(`SELECT outcome, COUNT(*)::int AS n FROM metered_tasks GROUP BY 1`);
      expect(Object.fromEntries(taskRows.rows.map((r) => [r.outcome, r.n]))).toEqual({ completed: tasks.completed, failed: tasks.failed });

      // Reputation: each task outcome counted once, as the pure functions count the same events.
      const reference = new Map<string, MachineRecord>();
      const facts = events.flatMap((x) =>
        x.contract === TASK_ATTEMPT_ENDED
          ? [x.payload as TaskAttemptEnded]
          : x.contract === TASK_ATTEMPTS_ENDED
            ? (x.payload as TaskAttemptsEnded).attempts
            : [],
      );
      for (const t of facts) {
        const r = reference.get(t.machineId) ?? newMachineRecord(t.machineId);
        reference.set(t.machineId, r);
        const outcome = t.outcome === 'completed' ? 'success' : taskFailureOutcome(t.cause ?? 'error');
        applyTaskOutcome(r, `task:${t.taskId}:${t.attempt}`, t.deploymentId, outcome, Date.parse(t.endedAt), DEFAULT_PARAMS);
      }
      const at = base + 12 * HOUR_MS;
      const counts = (r: Pick<MachineRecord, 'tasks'>) =>
        Object.entries(r.tasks)
          .map(([d, t]) => [
            d,
            ...[t.attempts, t.shared, t.machine].map((c) => Number(valueAt(c, at, DEFAULT_PARAMS.halfLifeMs).toFixed(6))),
          ])
          .sort();
      await waitFor(
        'reputation counted every task outcome once',
        async () => {
          for (const [machineId, r] of reference) {
            const { rows } = await fdb.query(`SELECT record FROM reputation_machines WHERE machine_id = $1`, [machineId]);
            if (!rows[0] || JSON.stringify(counts(rows[0].record as MachineRecord)) !== JSON.stringify(counts(r))) return false;
          }
          return true;
        },
        90_000,
      );
      const settledMs = Date.now() - killedAt;
      console.log(
        `faults: killed NATS ${leaderName} (leader of EVENTS), one metering and one reputation replica; ` +
          `${events.length - half} events published after it in ${publishedAfterKillMs} ms, all applied ${settledMs} ms after the kill; ` +
          `${done.containers} containers, ${tasks.completed + tasks.failed} task attempts, usage exact, reputation exact`,
      );
      victim.start();
      await cluster.ready();
    } finally {
      await fdb.end();
      await faultsSchema.drop();
    }
  }, 240_000);
});
