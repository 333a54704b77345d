import { randomUUID } from 'node:crypto';
import type pg from 'pg';
import type { NatsConnection } from '@nats-io/transport-node';
import { HOUR_MS, hourFloor } from '#tern/metering';
import { createDataSource, runMigrations } from '#tern/persistence';
import { connectNats, Messaging, Namespace } from '#tern/messaging';
import { createTestSchema, TEST_NATS, type TestSchema, uniqueName } from '../support/isolation.js';
import { deleteNamespaces } from '../support/nats.js';
import { type ServiceProcess, waitFor } from '../support/processes.js';
import {
  announcedIntervals,
  appliedAll,
  expectedUsage,
  ledger,
  makeScenario,
  progress,
  publishAll,
  placeScenario,
  schemaClient,
  startMetering,
} from './scenario.js';

/**
 * Metering as a real process against the real NATS and Postgres: a shuffled history of
 * containers and tasks, part of it published while metering lies dead after kill -9, some of
 * it twice; the result must match the true lifetimes exactly and equal a replay of the whole
 * stream into an empty schema.
 */
describe('metering: exact, idempotent, resumable', () => {
  const schemas: TestSchema[] = [];
  const dbs: pg.Client[] = [];
  const processes: ServiceProcess[] = [];
  let ns: Namespace;
  let nc: NatsConnection;
  let messaging: Messaging;

  const startMeteringOn = async (schema: TestSchema) => {
    const p = await startMetering(schema, ns.name);
    processes.push(p);
    return p;
  };

  beforeAll(async () => {
    ns = new Namespace(uniqueName('meter'));
    nc = await connectNats({ ...TEST_NATS, name: 'metering-test' });
    messaging = new Messaging(nc, ns);
    for (const label of ['meterlive', 'meterreplay']) {
      const schema = await createTestSchema(label);
      schemas.push(schema);
    }
  });

  afterAll(async () => {
    for (const p of processes) await p.stop();
    for (const db of dbs) await db.end();
    await nc?.close();
    for (const s of schemas) await s.drop();
    await deleteNamespaces(ns.name);
  });

  it('matches the true lifetimes after a kill -9 and duplicates, and equals a replay of the whole stream', async () => {
    const base = hourFloor(Date.now()) - 6 * HOUR_MS;
    const scenario = makeScenario(base, [randomUUID(), randomUUID()]);
    const { events, containers, tasks } = scenario;
    const done = (db: pg.Client) => appliedAll(db, scenario);

    let metering = await startMeteringOn(schemas[0]);
    const live = await schemaClient(schemas[0]);
    dbs.push(live);
    await placeScenario(live, containers);
    const half = Math.floor(events.length / 2);
    await publishAll(messaging, events.slice(0, half));
    await waitFor('metering to start applying', async () => (await progress(live)).containers > 0 || undefined);
    expect(await metering.kill('SIGKILL')).toBeNull();

    // While metering is dead: the rest of the stream, then a stretch of it again without
    // message ids (stored twice by JetStream, so only metering's own idempotency protects it).
    await publishAll(messaging, events.slice(half));
    await publishAll(messaging, events.slice(0, 30), { withMsgId: false });

    metering = await startMeteringOn(schemas[0]);
    await waitFor('every event applied after the restart', async () => (await done(live)) || undefined, 30_000);

    const byMachine = await live.query(
      `SELECT machine_id AS key, SUM(seconds)::float8 AS seconds, SUM(seconds * gpu_count)::float8 AS gpu FROM usage_intervals GROUP BY 1`,
    );
    const machineTruth = expectedUsage(containers, (c) => c.machineId);
    expect(byMachine.rows.length).toBe(machineTruth.size);
    for (const r of byMachine.rows) {
      expect(r.seconds).toBeCloseTo(machineTruth.get(r.key)!.seconds, 6);
      expect(r.gpu).toBeCloseTo(machineTruth.get(r.key)!.gpuSeconds, 6);
    }
    const byDeployment = await live.query(
      `SELECT deployment_id AS key, SUM(seconds * cpu_millicores / 1000.0)::float8 AS cpu FROM usage_intervals GROUP BY 1`,
    );
    const deploymentTruth = expectedUsage(containers, (c) => c.deploymentId);
    for (const r of byDeployment.rows) expect(r.cpu).toBeCloseTo(deploymentTruth.get(r.key)!.cpuCoreSeconds, 6);

    // Slices are per container and UTC hour, and only closed ones remain.
    const slices = await live.query(`SELECT COUNT(*)::int AS n, BOOL_AND(closed) AS closed,
      BOOL_AND(date_trunc('hour', period_start) = date_trunc('hour', period_end - interval '1 microsecond')) AS within_hour FROM usage_intervals`);
    expect(slices.rows[0]).toMatchObject({ closed: true, within_hour: true });
    expect(slices.rows[0].n).toBeGreaterThan(containers.length);

    // A lost machine's container ends at its last heartbeat; a crash at the crash, not at the later stop report.
    const lost = containers.find((c) => c.ending === 'machine-lost')!;
    const crashed = containers.find((c) => c.ending === 'crashed')!;
    const ends = await live.query(`SELECT container_id, ended_at, end_reason FROM metered_containers WHERE container_id = ANY($1)`, [
      [lost.id, crashed.id],
    ]);
    const endOf = (id: string) => ends.rows.find((r) => r.container_id === id);
    expect([endOf(lost.id).ended_at.getTime(), endOf(lost.id).end_reason]).toEqual([lost.end, 'machine-lost']);
    expect([endOf(crashed.id).ended_at.getTime(), endOf(crashed.id).end_reason]).toEqual([crashed.end, 'crashed']);

    const taskRows = await live.query(
      `SELECT outcome, COUNT(*)::int AS n, SUM(duration_ms)::float8 / 1000 AS secs FROM metered_tasks GROUP BY 1`,
    );
    const byOutcome = Object.fromEntries(taskRows.rows.map((r) => [r.outcome, r]));
    expect(byOutcome.completed.n).toBe(tasks.completed);
    expect(byOutcome.failed.n).toBe(tasks.failed);
    expect(byOutcome.completed.secs + byOutcome.failed.secs).toBeCloseTo(tasks.seconds, 6);

    // What metering announced on EVENTS, read as the contract says, is what it stored.
    const announced = await announcedIntervals(messaging);
    const stored = await live.query(`SELECT event_id, seconds FROM usage_intervals`);
    expect(announced).toEqual(new Map(stored.rows.map((r) => [r.event_id, r.seconds])));

    // Replay: a metering with an empty schema and no consumers reads EVENTS from the start.
    await metering.stop();
    const jsm = await messaging.jsm();
    for await (const c of jsm.consumers.list(ns.stream('EVENTS'))) {
      if (c.name.startsWith('metering_')) await jsm.consumers.delete(ns.stream('EVENTS'), c.name);
    }
    // The scheduler's placements are there before any event (migrated first, as a service would).
    const migrated = await createDataSource({ url: schemas[1].url, schema: schemas[1].schema, runMigrations: true }).initialize();
    await runMigrations(migrated);
    await migrated.destroy();
    const replay = await schemaClient(schemas[1]);
    dbs.push(replay);
    await placeScenario(replay, containers);
    await startMeteringOn(schemas[1]);
    await waitFor('the replay to finish', async () => (await done(replay)) || undefined, 30_000);
    const [a, b] = [await ledger(live), await ledger(replay)];
    expect(b.usage.length).toBe(a.usage.length);
    expect(b.usage).toEqual(a.usage);
    expect(b.tasks).toEqual(a.tasks);
  });
});
