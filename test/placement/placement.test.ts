import pg from 'pg';
import type { NatsConnection } from '@nats-io/transport-node';
import { ROUTES_BUCKET, type RouteRecord, type ResolvedSpec, SCALE_COMMAND } from '#tern/contracts';
import { connectNats, Messaging, Namespace } from '#tern/messaging';
import { createTestSchema, TEST_NATS, type TestSchema, testEnv, uniqueName } from '../support/isolation.js';
import { deleteNamespaces } from '../support/nats.js';
import { freePort, ServiceProcess, waitFor } from '../support/processes.js';
import { insertPool, insertWorkspace } from '../support/rows.js';
import { addMachine, FakeAgent, GiB, readyDeployment, spec } from './harness.js';

/** Scale commands in, containers placed on fake agents, routes out: the scheduler's placement end to end. */
describe('placement', () => {
  let schema: TestSchema;
  let ns: Namespace;
  const schedulers: ServiceProcess[] = [];
  let nc: NatsConnection;
  let messaging: Messaging;
  let db: pg.Client;
  let workspaceId: string;
  const agents: FakeAgent[] = [];
  let issued = Date.parse('2026-01-01T00:00:00Z');

  const startScheduler = async () => {
    const s = new ServiceProcess('scheduler', testEnv(schema, ns.name, { HTTP_PORT: String(await freePort()) })).start();
    schedulers.push(s);
    await s.ready();
    return s;
  };
  const agent = (machineId: string) => {
    const a = new FakeAgent(machineId, messaging);
    agents.push(a);
    return a;
  };
  const deploy = (name: string, s: ResolvedSpec) => readyDeployment(db, workspaceId, name, s);
  const scale = (
    deploymentId: string,
    desired: number,
    idleContainers: string[] = [],
    issuedAt = new Date((issued += 1000)).toISOString(),
  ) =>
    messaging.publish(
      SCALE_COMMAND,
      { deploymentId, deploymentVersion: 1, desired, reason: 'test', idleContainers, issuedAt },
      { tokens: [deploymentId] },
    );
  const containers = async (deploymentId: string, states = ['scheduled', 'starting', 'running']) =>
    (
      await db.query(
        `SELECT c.* FROM containers c JOIN deployment_versions dv ON dv.id = c.deployment_version_id WHERE dv.deployment_id = $1 AND c.state = ANY($2) ORDER BY c.id`,
        [deploymentId, states],
      )
    ).rows;
  const version = async (deploymentId: string) =>
    (await db.query(`SELECT * FROM deployment_versions WHERE deployment_id = $1`, [deploymentId])).rows[0];
  const routes = async (deploymentId: string) => {
    const kv = await messaging.kv({ name: ROUTES_BUCKET.name });
    const out: RouteRecord[] = [];
    for await (const key of await kv.keys()) {
      const e = await kv.get(key);
      if (e && e.operation === 'PUT') {
        const r = e.json<RouteRecord>();
        if (r.deploymentId === deploymentId) out.push(r);
      }
    }
    return out.sort((a, b) => a.containerId.localeCompare(b.containerId));
  };

  beforeAll(async () => {
    schema = await createTestSchema('place');
    ns = new Namespace(uniqueName('place'));
    await startScheduler();
    nc = await connectNats({ ...TEST_NATS, name: 'placement-test' });
    messaging = new Messaging(nc, ns);
    db = new pg.Client({ connectionString: schema.url, options: `-c search_path=${schema.schema}` });
    await db.connect();
    for (const pool of ['a', 'b', 'gpu', 'd', 'e']) await insertPool(db, pool);
    workspaceId = await insertWorkspace(db, 'acme');
  });

  afterAll(async () => {
    agents.forEach((a) => a.close());
    for (const s of schedulers) await s.stop();
    await db?.end();
    await nc?.close();
    await schema?.drop();
    await deleteNamespaces(ns.name);
  });

  it('places desired containers by best fit, routes them when ready, and stops only idle ones', async () => {
    await addMachine(db, 'a-1', { pool: 'a' });
    await addMachine(db, 'a-2', { pool: 'a' });
    const [a1, a2] = [agent('a-1'), agent('a-2')];
    const id = await deploy('a', spec({ pool: 'a' }));

    await scale(id, 2);
    const placed = await waitFor('two routes', async () => ((await routes(id)).length === 2 ? routes(id) : undefined));
    // Best fit packs both onto one machine (the lower id on a tie) and leaves the other idle.
    expect(placed.map((r) => r.machineId)).toEqual(['a-1', 'a-1']);
    expect(placed.every((r) => r.capacity === 6 && r.version === 1)).toBe(true);
    expect(a2.starts).toEqual([]);
    expect(a1.starts).toHaveLength(2);
    expect(a1.starts[0]).toMatchObject({
      deploymentId: id,
      workspaceId,
      deploymentKind: 'endpoint',
      handler: 'app.py:predict',
      code: `sha256:${'a'.repeat(64)}`,
      env: { MODEL: 'tiny' },
      resources: { cpuMillicores: 1000, memoryBytes: GiB, gpuCount: 0 },
      workers: 2,
      concurrency: 3,
      ports: [],
      startupTimeoutSeconds: 120,
    });
    const rows = await containers(id);
    expect(rows.map((r) => r.state)).toEqual(['running', 'running']);
    expect(rows[0].requested).toMatchObject({ cpuMillicores: 1000, memoryBytes: GiB, gpuCount: 0, gpuIndexes: [] });
    expect((await version(id)).desired_containers).toBe(2);

    // An older command is ignored.
    await scale(id, 0, [], '2025-01-01T00:00:00.000Z');
    await new Promise((r) => setTimeout(r, 1500));
    expect((await version(id)).desired_containers).toBe(2);
    expect(a1.stops).toEqual([]);

    // Down to 0 with one idle: only that one stops, the busy one stays.
    await scale(id, 0, [rows[0].id]);
    await waitFor('one stop', async () => a1.stops.length === 1);
    expect(a1.stops).toEqual([rows[0].id]);
    await waitFor('one route left', async () => (await routes(id)).length === 1);
    await new Promise((r) => setTimeout(r, 1500));
    expect(a1.stops).toEqual([rows[0].id]);

    await scale(id, 0, [rows[1].id]);
    await waitFor('routes gone', async () => (await routes(id)).length === 0);
    // The route goes first (no request is sent to a container being stopped), then the stop command.
    await waitFor('the second stop', async () => a1.stops.length === 2);
    expect(a1.stops).toEqual([rows[0].id, rows[1].id]);
    await waitFor('both stopped', async () => (await containers(id, ['stopped'])).length === 2);
  });

  it('never overbooks a machine, even with two scheduler replicas placing at once', async () => {
    await startScheduler();
    // Room for exactly four 1-CPU containers.
    await addMachine(db, 'b-1', { pool: 'b', cpus: 4, memoryGiB: 64 });
    agent('b-1');
    const x = await deploy('bx', spec({ pool: 'b' }));
    const y = await deploy('by', spec({ pool: 'b' }));
    await Promise.all([scale(x, 5), scale(y, 2)]);

    await waitFor('a reason on x', async () => (await version(x)).placement_reason);
    await waitFor('four placed', async () => (await containers(x)).length + (await containers(y)).length === 4);
    await new Promise((r) => setTimeout(r, 2500));
    const all = [...(await containers(x)), ...(await containers(y))];
    expect(all).toHaveLength(4);
    expect(all.reduce((n, c) => n + c.requested.cpuMillicores, 0)).toBe(4000);
    expect((await version(x)).placement_reason).toBe('not enough free CPU: needs 1 core, the most free is 0 cores (b-1)');
    const stop = schedulers.pop()!;
    await stop.stop();
  });

  it('says why a GPU request cannot be placed', async () => {
    await addMachine(db, 'gpu-1', { pool: 'gpu', gpus: ['NVIDIA H100 80GB HBM3'] });
    agent('gpu-1');
    const id = await deploy('g', spec({ pool: 'gpu', gpuTypes: ['A100'], gpuCount: 1 }));
    await scale(id, 1);
    const v = await waitFor('a placement reason', async () => ((await version(id)).placement_reason ? version(id) : undefined));
    expect(v.placement_reason).toBe('no ready machine in pool gpu with gpu A100');
    expect(await containers(id, ['scheduled', 'starting', 'running', 'failed'])).toEqual([]);

    // The machine gains an A100: room grew in the pool, so the next pass places it, back-off or not.
    await db.query(
      `UPDATE machines SET gpus = gpus || '[{"index": 1, "model": "NVIDIA A100-SXM4-80GB", "memoryBytes": 1}]'::jsonb WHERE id = 'gpu-1'`,
    );
    await waitFor('placed', async () => (await routes(id)).length === 1, 5000);
    expect((await version(id)).placement_reason).toBeNull();
    expect((await containers(id))[0].requested).toMatchObject({ gpuCount: 1, gpu: 'A100', gpuIndexes: [1] });
  }, 60_000);

  it('places a version short of room within 2 s of room freeing, whatever its back-off, with or without an event', async () => {
    await addMachine(db, 'e-1', { pool: 'e', cpus: 2, memoryGiB: 64 });
    const e1 = agent('e-1');
    const big = await deploy('e-big', spec({ pool: 'e', cpuMillicores: 2000 }));
    await scale(big, 1);
    await waitFor('the big one placed', async () => (await containers(big)).length === 1);
    const small = await deploy('e-small', spec({ pool: 'e' }));
    await scale(small, 2);
    await waitFor('a reason on the small one', async () => (await version(small)).placement_reason);
    // Tries after 1, 2 and 4 s (a pass late each time at most): the back-off is 8 s by now, the next try 5 s away or more.
    await new Promise((r) => setTimeout(r, 9500));
    expect(await containers(small)).toEqual([]);

    // The machine grows by a core (as a re-registration would write it): no event says so.
    await db.query(`UPDATE machines SET cpu_threads = 3 WHERE id = 'e-1'`);
    let t0 = Date.now();
    await waitFor('one small placed', async () => (await containers(small)).length === 1, 10_000, 50);
    expect(Date.now() - t0).toBeLessThan(2000);

    // The big deployment is deleted (the state the gateway writes): its container stops, the other small one takes its room.
    await db.query(`UPDATE deployments SET state = 'deleted' WHERE id = $1`, [big]);
    await waitFor('the big one told to stop', async () => e1.stops.length === 1, 10_000, 20);
    t0 = Date.now();
    await waitFor('both small placed', async () => (await containers(small)).length === 2, 10_000, 50);
    expect(Date.now() - t0).toBeLessThan(2000);
    expect((await containers(small)).every((c) => c.machine_id === 'e-1')).toBe(true);
    await waitFor('the reason cleared', async () => (await version(small)).placement_reason === null);
  }, 60_000);

  it('replaces the containers of a machine that goes offline on another machine', async () => {
    await addMachine(db, 'd-1', { pool: 'd' });
    await addMachine(db, 'd-2', { pool: 'd' });
    agent('d-1');
    const d2 = agent('d-2');
    const id = await deploy('d', spec({ pool: 'd' }));
    await scale(id, 1);
    const [first] = await waitFor('one route', async () => ((await routes(id)).length === 1 ? routes(id) : undefined));
    expect(first.machineId).toBe('d-1');

    await db.query(`UPDATE machines SET state = 'offline', state_reason = 'test' WHERE id = 'd-1'`);
    const [second] = await waitFor('a route on d-2', async () => {
      const r = await routes(id);
      return r.length === 1 && r[0].machineId === 'd-2' ? r : undefined;
    });
    expect(second.containerId).not.toBe(first.containerId);
    expect(d2.starts).toHaveLength(1);
    const lost = (await db.query(`SELECT state, state_reason FROM containers WHERE id = $1`, [first.containerId])).rows[0];
    expect(lost).toEqual({ state: 'failed', state_reason: 'machine offline' });
  });
});
