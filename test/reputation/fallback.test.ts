import pg from 'pg';
import type { NatsConnection } from '@nats-io/transport-node';
import { ROUTES_BUCKET, type RouteRecord, SCALE_COMMAND } from '#tern/contracts';
import { connectNats, Messaging, Namespace } from '#tern/messaging';
import { addMachine, FakeAgent, spec } from '../placement/harness.js';
import { createTestSchema, TEST_NATS, type TestSchema, testEnv, uniqueName } from '../support/isolation.js';
import { deleteNamespaces } from '../support/nats.js';
import { insertDeployment, insertWorkspace } from '../support/rows.js';
import { freePort, ServiceProcess, waitFor } from '../support/processes.js';

/** With the `reputation` bucket empty (no reputation service yet), the scheduler places by the stored scores. */
describe('placement by stored reputation', () => {
  let schema: TestSchema;
  let ns: Namespace;
  let scheduler: ServiceProcess;
  let nc: NatsConnection;
  let messaging: Messaging;
  let db: pg.Client;
  const agents: FakeAgent[] = [];

  beforeAll(async () => {
    schema = await createTestSchema('repfall');
    ns = new Namespace(uniqueName('repfall'));
    scheduler = new ServiceProcess('scheduler', testEnv(schema, ns.name, { HTTP_PORT: String(await freePort()) })).start();
    await scheduler.ready();
    nc = await connectNats({ ...TEST_NATS, name: 'reputation-fallback-test' });
    messaging = new Messaging(nc, ns);
    db = new pg.Client({ connectionString: schema.url, options: `-c search_path=${schema.schema}` });
    await db.connect();
  });

  afterAll(async () => {
    agents.forEach((a) => a.close());
    await scheduler?.stop();
    await db?.end();
    await nc?.close();
    await schema?.drop();
    await deleteNamespaces(ns.name);
  });

  it('keeps a deployment with min_reputation off the machine whose newest stored score is below it', async () => {
    await addMachine(db, 'm-good', { cpus: 8 });
    await addMachine(db, 'm-bad', { cpus: 2 });
    agents.push(new FakeAgent('m-good', messaging), new FakeAgent('m-bad', messaging));
    // m-bad's newest row counts, not its better old one.
    await db.query(
      `INSERT INTO reputation_scores (machine_id, score, computed_at) VALUES ('m-good', 0.9, now()), ('m-bad', 0.95, now() - interval '1 day'), ('m-bad', 0.5, now())`,
    );
    const workspaceId = await insertWorkspace(db, 'acme');
    const { deploymentId: id } = await insertDeployment(db, {
      workspaceId,
      name: 'picky',
      state: 'ready',
      spec: spec({ minReputation: 0.7 }),
    });

    await messaging.publish(
      SCALE_COMMAND,
      { deploymentId: id, deploymentVersion: 1, desired: 2, reason: 'test', idleContainers: [], issuedAt: new Date().toISOString() },
      { tokens: [id] },
    );
    const placed = await waitFor('two routes', async () => {
      const kv = await messaging.kv({ name: ROUTES_BUCKET.name });
      const out: RouteRecord[] = [];
      for await (const key of await kv.keys()) {
        const e = await kv.get(key);
        if (e && e.operation === 'PUT') out.push(e.json<RouteRecord>());
      }
      return out.length === 2 ? out : undefined;
    });
    expect(placed.map((r) => r.machineId)).toEqual(['m-good', 'm-good']);
  });
});
