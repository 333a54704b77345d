import pg from 'pg';
import type { NatsConnection, Subscription } from '@nats-io/transport-node';
import {
  AGENT_CONTAINER_START,
  AGENT_CONTAINER_STOP,
  type ContainerStart,
  MACHINE_FAULT,
  MACHINE_NETWORK_TESTED,
  type MachineFault,
  type ResolvedSpec,
} from '#tern/contracts';
import { connectNats, Messaging, Namespace } from '#tern/messaging';
import { addMachine, FakeAgent, readyDeployment, routesOf, scaleTo, spec } from '../placement/harness.js';
import { insertPool, insertWorkspace } from '../support/rows.js';
import { createTestSchema, TEST_NATS, type TestSchema, testEnv, uniqueName } from '../support/isolation.js';
import { deleteNamespaces } from '../support/nats.js';
import { freePort, ServiceProcess, waitFor } from '../support/processes.js';
import { MachineEvents, reputationEntry } from './events.js';

/** The start limit the scheduler runs with here: longer than a start command's 10 s timeout. */
const START_LIMIT_SECONDS = 15;

/**
 * Reputation from what the control plane saw, with the real scheduler and reputation service:
 * a new machine is `unproven` and its own network claim scores nothing; a machine that never
 * answers a start command, and one that accepts starts and never reports anything, are failed by
 * the scheduler itself, the faults reach reputation, and within 3 failed starts each falls below
 * its pool's min_reputation (0.9) so the deployment goes to an honest machine.
 */
describe('reputation from faults the control plane observed', () => {
  let schema: TestSchema;
  let ns: Namespace;
  const services: ServiceProcess[] = [];
  let nc: NatsConnection;
  let messaging: Messaging;
  let db: pg.Client;
  let workspaceId: string;
  const agents: FakeAgent[] = [];
  const subs: Subscription[] = [];
  const faults: MachineFault[] = [];
  const silentStarts: ContainerStart[] = [];
  const lazyStarts: ContainerStart[] = [];

  const deploy = (name: string, s: ResolvedSpec) => readyDeployment(db, workspaceId, name, s);
  const scale = (deploymentId: string, desired: number) => scaleTo(messaging, deploymentId, desired);
  const routes = (deploymentId: string) => routesOf(messaging, deploymentId);
  const containersOn = async (machineId: string) =>
    (await db.query(`SELECT id, state, state_reason AS reason FROM containers WHERE machine_id = $1 ORDER BY created_at`, [machineId]))
      .rows;

  beforeAll(async () => {
    schema = await createTestSchema('repfault');
    ns = new Namespace(uniqueName('repfault'));
    const env = async (extra: Record<string, string>) =>
      testEnv(schema, ns.name, { HTTP_PORT: String(await freePort()), REPUTATION_RECOMPUTE_INTERVAL_MS: '300', ...extra });
    services.push(new ServiceProcess('reputation', await env({})).start());
    services.push(new ServiceProcess('scheduler', await env({ CONTAINER_START_LIMIT_SECONDS: String(START_LIMIT_SECONDS) })).start());
    await Promise.all(services.map((s) => s.ready()));
    nc = await connectNats({ ...TEST_NATS, name: 'reputation-faults-test' });
    messaging = new Messaging(nc, ns);
    db = new pg.Client({ connectionString: schema.url, options: `-c search_path=${schema.schema}` });
    await db.connect();
    // The minimum the pool had: a machine with no history must not sit above it for long.
    for (const pool of ['strict', 'lazy']) await insertPool(db, pool, { minReputation: 0.9 });
    workspaceId = await insertWorkspace(db, 'acme');
    subs.push(messaging.listen(MACHINE_FAULT, (f) => void faults.push(f)));

    // The small machines are what best fit picks first.
    await addMachine(db, 'm-silent', { pool: 'strict', cpus: 2 });
    await addMachine(db, 'm-honest', { pool: 'strict', cpus: 8 });
    await addMachine(db, 'm-lazy', { pool: 'lazy', cpus: 2 });
    await addMachine(db, 'm-backup', { pool: 'lazy', cpus: 8 });
    agents.push(new FakeAgent('m-honest', messaging), new FakeAgent('m-backup', messaging));
    // Hears its start commands and answers none.
    subs.push(messaging.listen(AGENT_CONTAINER_START, (cmd) => void silentStarts.push(cmd), ['m-silent']));
    // Accepts every start and stop, and then does nothing: no starting, no ready, no failure.
    subs.push(
      messaging.serve(
        AGENT_CONTAINER_START,
        'agent-m-lazy',
        (cmd) => {
          lazyStarts.push(cmd);
          return { accepted: true };
        },
        ['m-lazy'],
      ),
      messaging.serve(AGENT_CONTAINER_STOP, 'agent-m-lazy', () => ({ accepted: true }), ['m-lazy']),
    );

    const events = new MachineEvents(messaging, workspaceId);
    const joined = new Date(Date.now() - 3600_000);
    for (const [id, pool] of [
      ['m-silent', 'strict'],
      ['m-honest', 'strict'],
      ['m-lazy', 'lazy'],
      ['m-backup', 'lazy'],
    ])
      await events.joined(id, pool, joined);
    // m-silent claims a network ten times faster than anyone's: its own word, which scores nothing.
    await messaging.publish(MACHINE_NETWORK_TESTED, {
      machineId: 'm-silent',
      nats: { throughputMbps: 9400, latencyMs: 0.1 },
      http: { throughputMbps: 9400, latencyMs: 0.1 },
      testedAt: new Date().toISOString(),
    });
  });

  afterAll(async () => {
    agents.forEach((a) => a.close());
    subs.forEach((s) => s.unsubscribe());
    for (const s of services) await s.stop();
    await db?.end();
    await nc?.close();
    await schema?.drop();
    await deleteNamespaces(ns.name);
  });

  it('a machine with no history is unproven, and a network it claims scores nothing', async () => {
    const [silent, honest] = await waitFor('both machines scored', async () => {
      const [s, h] = [await reputationEntry(messaging, 'm-silent'), await reputationEntry(messaging, 'm-honest')];
      return s && h ? [s, h] : undefined;
    });
    for (const e of [silent, honest]) {
      expect(e.standing).toBe('unproven');
      expect(e.observed).toBe(0);
      expect(e.components.network).toBeUndefined();
      // The prior's guess admits it to the pool, so it can earn a record at all.
      expect(e.score).toBeGreaterThanOrEqual(0.9);
    }
    // 9.4 Gbps claimed against 900 Mbps: the same score.
    expect(silent.score).toBe(honest.score);
    console.log(`a new machine's reputation: ${silent.score} (${silent.standing}, ${silent.observed} observed)`);
  });

  it('a machine that never answers start commands falls below the pool minimum within 3 failed starts', async () => {
    const id = await deploy('model', spec({ pool: 'strict' }));
    const startedAt = Date.now();
    await scale(id, 1);
    const [route] = await waitFor(
      'the container served by the honest machine',
      async () => {
        const r = await routes(id);
        return r.length === 1 ? r : undefined;
      },
      90_000,
    );
    expect(route.machineId).toBe('m-honest');
    const tried = silentStarts.filter((s) => s.deploymentId === id).length;
    console.log(`placed on m-honest ${Date.now() - startedAt} ms after the scale command, after ${tried} unanswered start(s) on m-silent`);
    expect(tried).toBeGreaterThanOrEqual(1);
    expect(tried).toBeLessThanOrEqual(3);

    const silent = (await reputationEntry(messaging, 'm-silent'))!;
    expect(silent.score).toBeLessThan(0.9);
    expect(silent.components.startSuccess).toBeLessThan(0.7);
    // Each failed start shows why on its container, and went to reputation as the control plane's own fact.
    const failed = await containersOn('m-silent');
    expect(failed).toHaveLength(tried);
    for (const c of failed) {
      expect(c.state).toBe('failed');
      expect(c.reason).toMatch(/^start on machine m-silent failed: .*/);
    }
    await waitFor('the faults announced', async () => faults.filter((f) => f.machineId === 'm-silent').length === tried);
    expect(faults.filter((f) => f.machineId === 'm-silent').map((f) => [f.kind, f.afterReady, f.deploymentId])).toEqual(
      Array(tried).fill(['start-unanswered', false, id]),
    );
    console.log(`m-silent after ${tried} unanswered start(s): ${silent.score} (${silent.standing})`);
    // Nothing left in the outbox.
    expect((await db.query(`SELECT count(*)::int AS n FROM machine_fault_outbox`)).rows[0].n).toBe(0);
  }, 120_000);

  it('the scheduler fails a start not ready within its limit, says why, and places it elsewhere', async () => {
    const id = await deploy('lazy-model', spec({ pool: 'lazy' }));
    await scale(id, 1);
    const [first] = await waitFor('a start accepted by m-lazy', async () => {
      const s = lazyStarts.filter((c) => c.deploymentId === id);
      return s.length ? s : undefined;
    });
    const accepted = Date.now();
    const [route] = await waitFor(
      'the replacement served by m-backup',
      async () => {
        const r = await routes(id);
        return r.length === 1 ? r : undefined;
      },
      60_000,
    );
    const took = Date.now() - accepted;
    const tries = lazyStarts.filter((c) => c.deploymentId === id).length;
    console.log(
      `a silent accepted start was failed and replaced ${took} ms after it was accepted (limit ${START_LIMIT_SECONDS} s), after ${tries} start(s) on m-lazy`,
    );
    expect(route.machineId).toBe('m-backup');
    expect(took).toBeGreaterThanOrEqual((START_LIMIT_SECONDS - 1) * 1000);
    expect(tries).toBeLessThanOrEqual(3);

    const [row] = await containersOn('m-lazy');
    expect(row.id).toBe(first.containerId);
    expect(row.state).toBe('failed');
    expect(row.reason).toBe(
      `not ready within ${START_LIMIT_SECONDS} s of its placement on machine m-lazy (the start limit; last state scheduled)`,
    );
    await waitFor('the fault announced', async () => faults.some((f) => f.containerId === first.containerId));
    expect(faults.find((f) => f.containerId === first.containerId)).toMatchObject({
      kind: 'start-not-ready',
      machineId: 'm-lazy',
      afterReady: false,
      reason: row.reason,
    });
    const lazy = await waitFor('m-lazy below the minimum', async () => {
      const e = await reputationEntry(messaging, 'm-lazy');
      return e && e.score < 0.9 ? e : undefined;
    });
    expect(lazy.standing).toBe('unproven');
  }, 90_000);
});
