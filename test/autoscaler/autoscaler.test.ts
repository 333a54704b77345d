import type { KV } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/transport-node';
import {
  AGENT_LOAD_REPORT,
  DEPLOYMENTS_BUCKET,
  type DeploymentRecord,
  deploymentKey,
  LOAD_REPORT,
  type LoadReport,
  type ResolvedSpec,
  ROUTES_BUCKET,
  type RouteRecord,
  SCALE_BACKLOG,
  SCALE_COMMAND,
  ScaleCommand,
  SERVER_LOAD_REPORT,
} from '#tern/contracts';
import { connectNats, Messaging, Namespace, type RunningConsumer, startConsumer } from '#tern/messaging';
import { TEST_NATS, testEnv, uniqueName } from '../support/isolation.js';
import { deleteNamespaces } from '../support/nats.js';
import { counterValue } from '../support/metrics.js';
import { freePort, ServiceProcess, waitFor } from '../support/processes.js';

/** The autoscaler as a real process: deployments from KV, load from gateways, commands on COMMANDS. */
describe('autoscaler service', () => {
  let ns: Namespace;
  let autoscaler: ServiceProcess;
  let port: number;
  let nc: NatsConnection;
  let messaging: Messaging;
  let deployments: KV;
  let consumer: RunningConsumer;
  const commands: { at: number; command: ScaleCommand }[] = [];
  const timers: NodeJS.Timeout[] = [];

  beforeAll(async () => {
    ns = new Namespace(uniqueName('autoscale'));
    port = await freePort();
    autoscaler = new ServiceProcess('autoscaler', testEnv(undefined, ns.name, { HTTP_PORT: String(port) })).start();
    await autoscaler.ready();
    await autoscaler.waitForLog(/leading/);
    nc = await connectNats({ ...TEST_NATS, name: 'autoscaler-test' });
    messaging = new Messaging(nc, ns);
    deployments = await messaging.kv({ name: DEPLOYMENTS_BUCKET.name });
    consumer = await startConsumer(
      messaging,
      { stream: 'COMMANDS', durable: 'test_scale', filterSubject: SCALE_COMMAND.subject, payload: ScaleCommand },
      async (d) => void commands.push({ at: Date.now(), command: d.payload }),
    );
  });

  afterAll(async () => {
    timers.forEach(clearInterval);
    await consumer?.stop();
    await autoscaler?.stop();
    await nc?.close();
    await deleteNamespaces(ns.name);
  });

  const spec = (autoscaler: Partial<ResolvedSpec['autoscaler']> = {}, keepWarmSeconds = 1): ResolvedSpec => ({
    name: 'echo',
    kind: 'endpoint',
    image: 'host',
    command: ['serve'],
    cpuMillicores: 1000,
    memoryBytes: 512 * 2 ** 20,
    gpuTypes: [],
    gpuCount: 0,
    workers: 1,
    concurrentRequests: 30,
    keepWarmSeconds,
    timeoutSeconds: 180,
    autoscaler: { type: 'queue_depth', minContainers: 0, maxContainers: 5, tasksPerContainer: 30, ...autoscaler },
    env: {},
    volumes: [],
    pool: 'default',
  });

  async function deploy(deploymentId: string, s: ResolvedSpec, state: DeploymentRecord['state'] = 'active') {
    const record: DeploymentRecord = {
      deploymentId,
      workspaceId: 'ws1',
      name: s.name,
      version: 1,
      latest: true,
      state,
      spec: s,
      updatedAt: new Date().toISOString(),
    };
    await deployments.put(deploymentKey(deploymentId, 1), JSON.stringify(record));
  }

  /** A gateway reporting the same load twice a second until the returned stop is called. */
  function report(deploymentId: string, load: Partial<LoadReport>): () => void {
    const send = () =>
      messaging.emit(
        LOAD_REPORT,
        {
          gatewayId: 'g1',
          deploymentId,
          version: 1,
          inFlight: 0,
          buffered: 0,
          meanDurationMs: 0,
          containers: [],
          ...load,
          at: new Date().toISOString(),
        },
        [deploymentId],
      );
    send();
    const timer = setInterval(send, 500);
    timers.push(timer);
    return () => clearInterval(timer);
  }

  const commandsFor = (id: string) => commands.filter((c) => c.command.deploymentId === id);
  const command = (id: string, match: (c: ScaleCommand) => boolean, timeoutMs = 10_000) =>
    waitFor(`scale command for ${id}`, async () => commandsFor(id).find((c) => match(c.command)), timeoutMs, 50);

  it('scales from zero within a second of a backlog event', async () => {
    await deploy('d-backlog', spec());
    await command('d-backlog', (c) => c.desired === 0);
    const sentAt = Date.now();
    await messaging.publish(SCALE_BACKLOG, { deploymentId: 'd-backlog', heldRequests: 1, oldestWaitMs: 0, at: new Date().toISOString() });
    const hit = await command('d-backlog', (c) => c.desired === 1, 3000);
    expect(hit.at - sentAt).toBeLessThan(1000);
    expect(hit.command).toMatchObject({ deploymentVersion: 1, idleContainers: [] });
  });

  it('adds a second container for the 31st request, then goes to zero once both are idle past keep-warm', async () => {
    await deploy('d-load', spec());
    const stop = report('d-load', { inFlight: 30, buffered: 1, containers: [{ containerId: 'c1', inFlight: 30, idleSeconds: 0 }] });
    const up = await command('d-load', (c) => c.desired === 2);
    expect(up.command.reason).toMatch(/load 31 \/ 30 per container → 2/);
    stop();

    const idle = report('d-load', {
      containers: [
        { containerId: 'c1', inFlight: 0, idleSeconds: 2 },
        { containerId: 'c2', inFlight: 0, idleSeconds: 3 },
      ],
    });
    const down = await command('d-load', (c) => c.desired === 0);
    expect(down.command.idleContainers).toEqual(['c2', 'c1']);
    idle();
  });

  it('keeps idle containers until keep-warm has passed', async () => {
    await deploy('d-warm', spec({}, 3600));
    const stop = report('d-warm', {
      inFlight: 40,
      containers: [
        { containerId: 'w1', inFlight: 30, idleSeconds: 0 },
        { containerId: 'w2', inFlight: 10, idleSeconds: 0 },
      ],
    });
    await command('d-warm', (c) => c.desired === 2);
    stop();
    const quiet = report('d-warm', {
      containers: [
        { containerId: 'w1', inFlight: 0, idleSeconds: 5 },
        { containerId: 'w2', inFlight: 0, idleSeconds: 5 },
      ],
    });
    await new Promise((r) => setTimeout(r, 2500));
    quiet();
    expect(commandsFor('d-warm').at(-1)?.command.desired).toBe(2);
  });

  it("counts a machine's load report only for the containers placed on it", async () => {
    await deploy('d-machine', spec());
    const routes = await messaging.kv({ name: ROUTES_BUCKET.name });
    const route: RouteRecord = { containerId: 'c-m1', deploymentId: 'd-machine', version: 1, machineId: 'm-1', capacity: 30, readyAt: '' };
    await routes.put('c-m1', JSON.stringify(route));
    const machineReport = (machineId: string, inFlight: number) =>
      messaging.emit(
        AGENT_LOAD_REPORT,
        {
          gatewayId: 'g1', // claims to be the gateway: keyed by its machine all the same
          machineId,
          deploymentId: 'd-machine',
          version: 1,
          inFlight: 1000,
          buffered: 1000,
          meanDurationMs: 0,
          containers: [{ containerId: 'c-m1', inFlight, idleSeconds: 0 }],
          at: new Date().toISOString(),
        },
        ['d-machine'],
      );
    const refused = () => counterValue(`http://127.0.0.1:${port}`, 'tern_autoscaler_machine_reports_refused_total', {});
    const before = await refused();
    // m-2 reports m-1's container busy, with a flood it claims in total.
    machineReport('m-2', 300);
    await waitFor('the refusal counted', async () => (await refused()) === before + 1, 5000, 50);
    await new Promise((r) => setTimeout(r, 1500));
    expect(commandsFor('d-machine').every((c) => c.command.desired === 0)).toBe(true);
    // m-1's own report of its container counts, summed from the container (45 in flight → 2), not the claimed 2000.
    machineReport('m-1', 45);
    const up = await command('d-machine', (c) => c.desired > 0);
    expect(up.command.desired).toBe(2);
  });

  it("scales on a server's reported load only for containers placed on the reporting machine, up to max", async () => {
    const concurrency = spec({ type: 'concurrency', targetConcurrency: 30, targetLoad: 10, maxContainers: 4 });
    await deploy('d-served', concurrency);
    await deploy('d-victim', concurrency);
    const routes = await messaging.kv({ name: ROUTES_BUCKET.name });
    const route: RouteRecord = { containerId: 'c-s1', deploymentId: 'd-served', version: 1, machineId: 'm-1', capacity: 30, readyAt: '' };
    await routes.put('c-s1', JSON.stringify(route));
    const serverLoad = (machineId: string, deploymentId: string, load: number) =>
      messaging.emit(
        SERVER_LOAD_REPORT,
        { machineId, deploymentId, version: 1, containers: [{ containerId: 'c-s1', load }], at: new Date().toISOString() },
        [deploymentId],
      );
    const refused = () => counterValue(`http://127.0.0.1:${port}`, 'tern_autoscaler_server_loads_refused_total', {});
    const before = await refused();
    // m-2 speaks for m-1's container, and m-1 for its container under another deployment: neither counts.
    serverLoad('m-2', 'd-served', 1e6);
    serverLoad('m-1', 'd-victim', 1e6);
    await waitFor('both refusals counted', async () => (await refused()) === before + 2, 5000, 50);
    await new Promise((r) => setTimeout(r, 1500));
    expect([...commandsFor('d-served'), ...commandsFor('d-victim')].every((c) => c.command.desired === 0)).toBe(true);
    // m-1's own container: 25 / 10 → 3, no gateway having reported it; then a flood stops at max_containers.
    serverLoad('m-1', 'd-served', 25);
    const up = await command('d-served', (c) => c.desired > 0);
    expect(up.command).toMatchObject({ desired: 3, reason: expect.stringMatching(/reported load 25 \/ 10 per container → 3/) });
    serverLoad('m-1', 'd-served', 1e6);
    const capped = await command('d-served', (c) => c.desired > 3);
    expect(capped.command).toMatchObject({ desired: 4, reason: expect.stringContaining('capped at max_containers 4') });
  });

  it('caps at max_containers', async () => {
    await deploy('d-max', spec({ maxContainers: 2 }));
    const stop = report('d-max', { buffered: 1000 });
    const capped = await command('d-max', (c) => c.desired > 0);
    await new Promise((r) => setTimeout(r, 1500));
    stop();
    expect(capped.command.desired).toBe(2);
    expect(capped.command.reason).toContain('capped at max_containers 2');
    expect(Math.max(...commandsFor('d-max').map((c) => c.command.desired))).toBe(2);
  });

  it('keeps min_containers warm without traffic and asks for none once the deployment is stopped', async () => {
    await deploy('d-stop', spec({ minContainers: 1 }));
    await command('d-stop', (c) => c.desired === 1);
    await deploy('d-stop', spec({ minContainers: 1 }), 'stopped');
    const stopped = await command('d-stop', (c) => c.desired === 0);
    expect(stopped.command.reason).toBe('deployment stopped');
  });

  it('asks for none when a version is removed from the bucket', async () => {
    await deploy('d-gone', spec({ minContainers: 1 }));
    await command('d-gone', (c) => c.desired === 1);
    await deployments.delete(deploymentKey('d-gone', 1));
    const gone = await command('d-gone', (c) => c.desired === 0);
    expect(gone.command.reason).toBe('deployment removed');
  });

  it('lets only the lease holder act, and hands over when it stops', async () => {
    const standby = new ServiceProcess('autoscaler', testEnv(undefined, ns.name, { HTTP_PORT: String(await freePort()) })).start();
    try {
      await standby.ready();
      await new Promise((r) => setTimeout(r, 2000));
      expect(standby.lines.join('\n')).not.toMatch(/leading/);
      await autoscaler.stop();
      await standby.waitForLog(/leading/, 10_000);
      await deploy('d-handover', spec({ minContainers: 1 }));
      await command('d-handover', (c) => c.desired === 1);
    } finally {
      await standby.stop();
    }
  });
});
