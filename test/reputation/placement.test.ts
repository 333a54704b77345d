import pg from 'pg';
import type { NatsConnection } from '@nats-io/transport-node';
import { type ResolvedSpec } from '#tern/contracts';
import { connectNats, Messaging, Namespace } from '#tern/messaging';
import { addMachine, FakeAgent, readyDeployment, routesOf, scaleTo, spec } from '../placement/harness.js';
import { insertPool, insertWorkspace } from '../support/rows.js';
import { createTestSchema, TEST_NATS, type TestSchema, testEnv, uniqueName } from '../support/isolation.js';
import { deleteNamespaces } from '../support/nats.js';
import { freePort, ServiceProcess, waitFor } from '../support/processes.js';
import { MachineEvents, reputationEntry } from './events.js';

/**
 * Reputation steering placement: the reputation service scores two machines from their task
 * record, the scheduler reads the scores from the KV bucket, and a minimum between the two
 * scores (the deployment's or the pool's) keeps new containers off the failing machine.
 */
describe('placement by reputation', () => {
  let schema: TestSchema;
  let ns: Namespace;
  const services: ServiceProcess[] = [];
  let nc: NatsConnection;
  let messaging: Messaging;
  let db: pg.Client;
  let workspaceId: string;
  let good: FakeAgent;
  let bad: FakeAgent;
  let mid: number;

  const deploy = (name: string, s: ResolvedSpec) => readyDeployment(db, workspaceId, name, s);
  const scale = (deploymentId: string, desired: number) => scaleTo(messaging, deploymentId, desired);
  const routes = (deploymentId: string) => routesOf(messaging, deploymentId);
  const attempts = async (machineId: string) => {
    const r = (await db.query(`SELECT record FROM reputation_machines WHERE machine_id = $1`, [machineId])).rows[0]?.record;
    return Math.round(Object.values(r?.tasks ?? {}).reduce((n: number, t: any) => n + t.attempts.v, 0));
  };

  beforeAll(async () => {
    schema = await createTestSchema('repplace');
    ns = new Namespace(uniqueName('repplace'));
    for (const name of ['reputation', 'scheduler']) {
      const s = new ServiceProcess(
        name,
        testEnv(schema, ns.name, { HTTP_PORT: String(await freePort()), REPUTATION_RECOMPUTE_INTERVAL_MS: '300' }),
      ).start();
      services.push(s);
    }
    await Promise.all(services.map((s) => s.ready()));
    nc = await connectNats({ ...TEST_NATS, name: 'reputation-placement-test' });
    messaging = new Messaging(nc, ns);
    db = new pg.Client({ connectionString: schema.url, options: `-c search_path=${schema.schema}` });
    await db.connect();
    await insertPool(db, 'rep');
    workspaceId = await insertWorkspace(db, 'acme');
    // m-bad is the smaller machine, so best fit alone would send work there first.
    await addMachine(db, 'm-good', { pool: 'rep', cpus: 8 });
    await addMachine(db, 'm-bad', { pool: 'rep', cpus: 2 });
    good = new FakeAgent('m-good', messaging);
    bad = new FakeAgent('m-bad', messaging);

    // Both ran the same model; on m-bad every other task failed with a handler error.
    const events = new MachineEvents(messaging, workspaceId);
    const joined = new Date(Date.now() - 3600_000);
    await events.joined('m-good', 'rep', joined);
    await events.joined('m-bad', 'rep', joined);
    await events.tasks('m-good', 'dep-model', await events.containerReady('m-good', 'dep-model'), 20, 0);
    await events.tasks('m-bad', 'dep-model', await events.containerReady('m-bad', 'dep-model'), 20, 2);
    await waitFor('all task outcomes counted', async () => (await attempts('m-good')) === 20 && (await attempts('m-bad')) === 20);
    const [g, b] = await waitFor('both scores in the bucket, m-bad lower', async () => {
      const [eg, eb] = [await reputationEntry(messaging, 'm-good'), await reputationEntry(messaging, 'm-bad')];
      return eg && eb && eb.score < eg.score - 0.05 && eb.components.taskSuccess < 0.75 ? [eg, eb] : undefined;
    });
    mid = Math.round(((g.score + b.score) / 2) * 1000) / 1000;
  });

  afterAll(async () => {
    good?.close();
    bad?.close();
    for (const s of services) await s.stop();
    await db?.end();
    await nc?.close();
    await schema?.drop();
    await deleteNamespaces(ns.name);
  });

  it('without a minimum, best fit picks the smaller (failing) machine', async () => {
    const id = await deploy('loose', spec({ pool: 'rep' }));
    await scale(id, 1);
    const [route] = await waitFor('one route', async () => ((await routes(id)).length === 1 ? routes(id) : undefined));
    expect(route.machineId).toBe('m-bad');
  });

  it('a deployment whose min_reputation lies between the two scores is never placed on the failing machine', async () => {
    const id = await deploy('picky', spec({ pool: 'rep', minReputation: mid }));
    await scale(id, 3);
    const placed = await waitFor('three routes', async () => ((await routes(id)).length === 3 ? routes(id) : undefined));
    expect(placed.map((r) => r.machineId)).toEqual(['m-good', 'm-good', 'm-good']);
    expect(bad.starts.filter((s) => s.deploymentId === id)).toEqual([]);
    // Running work finishes: the loose deployment's container on m-bad is left alone.
    expect(bad.stops).toEqual([]);
  });

  it("a pool's min_reputation applies to deployments without one, and the stricter minimum wins", async () => {
    await db.query(`UPDATE pools SET min_reputation = $1 WHERE name = 'rep'`, [mid]);
    const none = await deploy('pooled', spec({ pool: 'rep' }));
    const lax = await deploy('lax', spec({ pool: 'rep', minReputation: 0.1 }));
    await Promise.all([scale(none, 1), scale(lax, 1)]);
    for (const id of [none, lax]) {
      const [route] = await waitFor('one route', async () => ((await routes(id)).length === 1 ? routes(id) : undefined));
      expect(route.machineId).toBe('m-good');
    }
    expect(bad.starts).toHaveLength(1);

    // Above both scores: nothing fits, and the reason says so.
    const strict = await deploy('strict', spec({ pool: 'rep', minReputation: 0.999 }));
    await scale(strict, 1);
    const reason = await waitFor(
      'a placement reason',
      async () =>
        (
          await db.query(
            `SELECT placement_reason FROM deployment_versions dv JOIN deployments d ON d.id = dv.deployment_id WHERE d.name = 'strict'`,
          )
        ).rows[0]?.placement_reason,
    );
    expect(reason).toMatch(/^no machine in pool rep has the minimum reputation 0\.999: the best is 0\.\d+ \(m-good\)$/);
  });
});
