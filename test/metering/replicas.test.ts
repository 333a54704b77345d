import { randomUUID } from 'node:crypto';
import type pg from 'pg';
import type { NatsConnection } from '@nats-io/transport-node';
import { HOUR_MS, hourFloor } from '#tern/metering';
import { connectNats, Messaging, Namespace } from '#tern/messaging';
import { createTestSchema, TEST_NATS, type TestSchema, uniqueName } from '../support/isolation.js';
import { deleteNamespaces } from '../support/nats.js';
import { type ServiceProcess, waitFor } from '../support/processes.js';
import { appliedAll, expectedUsage, makeScenario, progress, publishAll, placeScenario, schemaClient, startMetering } from './scenario.js';

/**
 * Two metering replicas on one database share the consumers: every event is applied by one of
 * them, and a kill -9 of one loses nothing (its unacknowledged events go to the other). The
 * usage must still match the true lifetimes exactly: nothing twice, nothing missing.
 */
describe('metering as two replicas', () => {
  let schema: TestSchema;
  let db: pg.Client;
  let ns: Namespace;
  let nc: NatsConnection;
  let messaging: Messaging;
  const processes: ServiceProcess[] = [];

  const start = async () => {
    const p = await startMetering(schema, ns.name);
    processes.push(p);
    return p;
  };

  beforeAll(async () => {
    ns = new Namespace(uniqueName('meter2'));
    nc = await connectNats({ ...TEST_NATS, name: 'metering-replicas-test' });
    messaging = new Messaging(nc, ns);
    schema = await createTestSchema('meter2');
  });

  afterAll(async () => {
    for (const p of processes) await p.stop();
    await db?.end();
    await nc?.close();
    await schema?.drop();
    await deleteNamespaces(ns.name);
  });

  it('matches the true lifetimes when one of two replicas is killed midway and events come twice', async () => {
    const base = hourFloor(Date.now()) - 6 * HOUR_MS;
    const scenario = makeScenario(base, [randomUUID(), randomUUID()], 48, 11);
    const { events, containers, tasks } = scenario;
    const [first] = [await start(), await start()];
    db = await schemaClient(schema);
    await placeScenario(db, containers);

    const half = Math.floor(events.length / 2);
    await publishAll(messaging, events.slice(0, half));
    await waitFor('metering to start applying', async () => (await progress(db)).containers > 0 || undefined);
    expect(await first.kill('SIGKILL')).toBeNull();
    await publishAll(messaging, events.slice(half));
    await publishAll(messaging, events.slice(0, 40), { withMsgId: false });

    const done = await waitFor('every event applied by the surviving replica', () => appliedAll(db, scenario), 60_000);
    expect(done.containers).toBe(containers.length);
    const byMachine = await db.query(`SELECT machine_id AS key, SUM(seconds)::float8 AS seconds FROM usage_intervals GROUP BY 1`);
    const truth = expectedUsage(containers, (c) => c.machineId);
    for (const r of byMachine.rows) expect(r.seconds).toBeCloseTo(truth.get(r.key)!.seconds, 6);
    const taskRows = await db.query(`SELECT outcome, COUNT(*)::int AS n FROM metered_tasks GROUP BY 1`);
    const byOutcome = Object.fromEntries(taskRows.rows.map((r) => [r.outcome, r.n]));
    expect(byOutcome).toEqual({ completed: tasks.completed, failed: tasks.failed });
  }, 120_000);
});
