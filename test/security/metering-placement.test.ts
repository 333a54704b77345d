import { randomUUID } from 'node:crypto';
import type pg from 'pg';
import type { NatsConnection } from '@nats-io/transport-node';
import { CONTAINER_STARTED, CONTAINER_STOPPED } from '#tern/contracts';
import { connectNats, Messaging, Namespace } from '#tern/messaging';
import { createTestSchema, TEST_NATS, testEnv, type TestSchema, uniqueName } from '../support/isolation.js';
import { deleteNamespaces } from '../support/nats.js';
import { counterValue } from '../support/metrics.js';
import { freePort, ServiceProcess, waitFor } from '../support/processes.js';
import { placeScenario, schemaClient } from '../metering/scenario.js';

/**
 * A machine lying to metering in its own container events (on its own subjects, as its NATS
 * permissions allow): another workspace, more GPUs, a start a month back, an end tomorrow. What
 * is charged comes from the scheduler's placement and what NATS saw; events about containers
 * not placed on the sender are refused and counted.
 */
describe('metering believes the placement, not the machine', () => {
  let schema: TestSchema;
  let ns: Namespace;
  let metering: ServiceProcess;
  let port: number;
  let nc: NatsConnection;
  let messaging: Messaging;
  let db: pg.Client;
  const owner = randomUUID();
  const victim = randomUUID();

  beforeAll(async () => {
    schema = await createTestSchema('meterlies');
    ns = new Namespace(uniqueName('meterlies'));
    port = await freePort();
    metering = new ServiceProcess(
      'metering',
      testEnv(schema, ns.name, { HTTP_PORT: String(port), METERING_CHECKPOINT_INTERVAL_MS: '200' }),
    ).start();
    await metering.ready();
    nc = await connectNats({ ...TEST_NATS, name: 'meterlies-test' });
    messaging = new Messaging(nc, ns);
    db = await schemaClient(schema);
  });

  afterAll(async () => {
    await metering?.stop();
    await db?.end();
    await nc?.close();
    await deleteNamespaces(ns.name);
    await schema?.drop();
  });

  const refused = (reason: string) => counterValue(`http://127.0.0.1:${port}`, 'tern_metering_events_refused_total', { reason });
  const event = (containerId: string, machineId: string, at: number) => ({
    containerId,
    deploymentId: randomUUID(),
    deploymentVersion: 7,
    workspaceId: victim,
    machineId,
    at: new Date(at).toISOString(),
  });

  it('charges the placed workspace, deployment and resources for the observed time, whatever the events claim', async () => {
    const placedAt = Date.now() - 20_000;
    const deploymentId = randomUUID();
    const resources = { cpuMillicores: 500, memoryBytes: 2 ** 29, gpuCount: 0 };
    await placeScenario(db, [
      { id: 'c-lie', machineId: 'm-1', deploymentId, workspaceId: owner, resources, start: placedAt + 1000, end: 0, ending: 'stopped' },
    ]);
    const month = 30 * 24 * 3600_000;
    await messaging.publish(CONTAINER_STARTED, {
      ...event('c-lie', 'm-1', Date.now() - month),
      resources: { cpuMillicores: 64_000, memoryBytes: 2 ** 40, gpuCount: 8, gpuType: 'H100' },
      startupLatencyMs: 1,
    });
    const sentStop = Date.now();
    await messaging.publish(CONTAINER_STOPPED, {
      ...event('c-lie', 'm-1', Date.now() + 24 * 3600_000),
      exitCode: 0,
      oomKilled: false,
      reason: 'stopped',
    });
    const rows = await waitFor('the container closed', async () => {
      const r = await db.query(`SELECT * FROM usage_intervals WHERE container_id = 'c-lie' AND closed`);
      return r.rows.length ? r.rows : undefined;
    });
    expect(new Set(rows.map((r) => r.workspace_id))).toEqual(new Set([owner]));
    expect(new Set(rows.map((r) => r.deployment_id))).toEqual(new Set([deploymentId]));
    expect(rows.every((r) => r.gpu_count === 0 && r.cpu_millicores === 500 && r.gpu_type === null)).toBe(true);
    const seconds = rows.reduce((s, r) => s + Number(r.seconds), 0);
    // From the placement (20 s ago) to when the stop reached NATS: not a month, not a day ahead.
    expect(seconds).toBeGreaterThan(19);
    expect(seconds).toBeLessThan((Date.now() - placedAt) / 1000 + 1);
    expect(seconds).toBeLessThan((sentStop - placedAt) / 1000 + 2);
  });

  it('refuses and counts events about a container placed on another machine, or never placed', async () => {
    const deploymentId = randomUUID();
    const resources = { cpuMillicores: 500, memoryBytes: 2 ** 29, gpuCount: 0 };
    await placeScenario(db, [
      { id: 'c-theirs', machineId: 'm-1', deploymentId, workspaceId: owner, resources, start: Date.now(), end: 0, ending: 'stopped' },
    ]);
    const [other, never] = [await refused('other-machine'), await refused('not-placed')];
    const claim = { resources: { cpuMillicores: 1000, memoryBytes: 2 ** 30, gpuCount: 1, gpuType: 'H100' }, startupLatencyMs: 1 };
    await messaging.publish(CONTAINER_STARTED, { ...event('c-theirs', 'm-2', Date.now()), ...claim });
    await messaging.publish(CONTAINER_STARTED, { ...event('c-made-up', 'm-2', Date.now()), ...claim });
    await waitFor(
      'both refusals counted',
      async () => (await refused('other-machine')) === other + 1 && (await refused('not-placed')) === never + 1,
    );
    const metered = await db.query(`SELECT container_id FROM metered_containers WHERE container_id IN ('c-theirs', 'c-made-up')`);
    expect(metered.rows).toEqual([]);
  });
});
