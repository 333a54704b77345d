import pg from 'pg';
import type { NatsConnection, Subscription } from '@nats-io/transport-node';
import { MACHINE_BEAT, MACHINE_NETWORK_TESTED, MACHINE_STATE_CHANGED, type MachineHeartbeat } from '#tern/contracts';
import { connectNats, Messaging, Namespace } from '#tern/messaging';
import { createTestSchema, TEST_NATS, type TestSchema, testEnv, uniqueName } from '../support/isolation.js';
import { deleteNamespaces } from '../support/nats.js';
import { freePort, ServiceProcess, waitFor } from '../support/processes.js';
import { ADMIN, client, registration, tern } from './harness.js';

const TTL_SECONDS = 2;

/**
 * The machine state machine end to end: a real gateway and two scheduler replicas (so the
 * offline sweep and the outbox relays must announce each machine once), heartbeats over NATS, a 2 s TTL.
 */
describe('machine registry: heartbeats, pool rules, offline', () => {
  let schema: TestSchema;
  let ns: Namespace;
  let base: string;
  let call: ReturnType<typeof client>;
  let nc: NatsConnection;
  let messaging: Messaging;
  let db: pg.Client;
  let sub: Subscription;
  const processes: ServiceProcess[] = [];
  const changes: { msgId?: string; data: { machineId: string; from: string | null; to: string; reason: string; changedAt: string } }[] = [];
  const pulses: NodeJS.Timeout[] = [];
  const sequences = new Map<string, number>();

  /** A beat as an agent sends it: core NATS, heard by whichever scheduler replica the queue group picks. */
  const beat = async (machineId: string, pool: string, extra: Partial<MachineHeartbeat> = {}) => {
    const sequence = (sequences.get(machineId) ?? 0) + 1;
    sequences.set(machineId, sequence);
    messaging.emit(
      MACHINE_BEAT,
      {
        machineId,
        pool,
        sentAt: new Date().toISOString(),
        sequence,
        cpuPercent: 12,
        memoryPercent: 40,
        gpus: [],
        runningContainers: [],
        ...extra,
      },
      [machineId],
    );
    await nc.flush();
  };
  /** Heartbeats every 500 ms until stopped, as a live agent would (faster than the TTL). */
  const keepBeating = (machineId: string, pool: string) => {
    beat(machineId, pool).catch(() => undefined);
    const timer = setInterval(() => {
      beat(machineId, pool).catch(() => undefined);
    }, 500);
    pulses.push(timer);
    return () => clearInterval(timer);
  };
  const state = async (machineId: string) =>
    (await db.query(`SELECT state, state_reason, state_changed_at, network FROM machines WHERE id = $1`, [machineId])).rows[0];
  const until = (machineId: string, wanted: string, timeoutMs = 8000) =>
    waitFor(
      `${machineId} ${wanted}`,
      async () => ((await state(machineId))?.state === wanted ? state(machineId) : undefined),
      timeoutMs,
      100,
    );
  const changesOf = (machineId: string) => changes.filter((c) => c.data.machineId === machineId).map((c) => c.data);
  /** A machine through the real flow: join token, registration. */
  const join = async (machineId: string, pool: string, gpuModels?: string[]) => {
    const made = await call('POST', '/api/v1/machines', ADMIN, { pool, machineId });
    const registered = await call('POST', '/api/v1/machine/register', made.body.joinToken, registration(pool, { gpuModels }));
    expect(registered.status).toBe(200);
    return registered.body.machineToken as string;
  };

  beforeAll(async () => {
    schema = await createTestSchema('mreg');
    ns = new Namespace(uniqueName('registry'));
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    call = client(base);
    const common = { MACHINE_HEARTBEAT_TTL_SECONDS: String(TTL_SECONDS), MACHINE_HEARTBEAT_INTERVAL_SECONDS: '1' };
    processes.push(
      new ServiceProcess('gateway', testEnv(schema, ns.name, { ...common, HTTP_PORT: String(port), BOOTSTRAP_ADMIN_TOKEN: ADMIN })).start(),
    );
    await processes[0].ready();
    for (let i = 0; i < 2; i++) {
      processes.push(new ServiceProcess('scheduler', testEnv(schema, ns.name, { ...common, HTTP_PORT: String(await freePort()) })).start());
    }
    await Promise.all(processes.map((p) => p.ready()));
    nc = await connectNats({ ...TEST_NATS, name: 'registry-test' });
    messaging = new Messaging(nc, ns);
    sub = nc.subscribe(messaging.subject(MACHINE_STATE_CHANGED), {
      callback: (_e, m) => void changes.push({ msgId: m.headers?.get('Nats-Msg-Id'), data: m.json() }),
    });
    db = new pg.Client({ connectionString: schema.url, options: `-c search_path=${schema.schema}` });
    await db.connect();
    await call('POST', '/api/v1/pools', ADMIN, { name: 'fast', minNetworkMbps: 100 });
    await call('POST', '/api/v1/pools', ADMIN, { name: 'h100', allowedGpuTypes: ['H100'] });
  }, 90_000);

  afterAll(async () => {
    pulses.forEach(clearInterval);
    sub?.unsubscribe();
    await Promise.all(processes.map((p) => p.stop()));
    await db?.end();
    await nc?.close();
    await schema?.drop();
    await deleteNamespaces(ns.name);
  });

  it('moves a registered machine to ready on its first heartbeat, and shows its use from the snapshot', async () => {
    await join('gpu-1', 'default');
    const stop = keepBeating('gpu-1', 'default');
    const ready = await until('gpu-1', 'ready');
    expect(ready.state_reason).toBe('first heartbeat');
    await waitFor('event', async () => changesOf('gpu-1').some((c) => c.to === 'ready'));
    const event = changes.find((c) => c.data.machineId === 'gpu-1' && c.data.to === 'ready')!;
    expect(event.data).toMatchObject({ from: 'registered', to: 'ready', reason: 'first heartbeat' });
    expect(event.msgId).toBe(`gpu-1:ready:${event.data.changedAt}`);

    const listed = await waitFor('snapshot in the API', async () => {
      const { body } = await call('GET', '/api/v1/machines/gpu-1', ADMIN);
      return body.cpu.usagePercent !== null ? body : undefined;
    });
    expect(listed).toMatchObject({
      state: 'ready',
      cpu: { usagePercent: 12 },
      memory: { usagePercent: 40 },
      heartbeat: { runningContainers: [] },
    });
    expect(Date.now() - Date.parse(listed.lastHeartbeatAt)).toBeLessThan(5000);

    const cli = await tern(['machine', 'list'], base, ADMIN);
    expect(cli.code).toBe(0);
    expect(cli.stdout).toMatch(/^ID\s+POOL\s+STATE\s+HARDWARE\s+CPU\s+MEMORY\s+GPUS\s+NETWORK\s+REPUTATION\s+LAST HEARTBEAT$/m);
    // No prover answers for this scripted machine: its hardware is unverified.
    expect(cli.stdout).toMatch(/^gpu-1\s+default\s+ready\s+unverified\s+16 vCPU 12%\s+64 GiB 40%\s+1x H100 80GB HBM3\s+-\s+-\s+\d+s ago$/m);
    stop();
  });

  it('marks a silent machine offline within the TTL, announced once across two schedulers, and ready again when beats resume', async () => {
    await join('gpu-2', 'default');
    const stop = keepBeating('gpu-2', 'default');
    await until('gpu-2', 'ready');
    stop();
    const stoppedAt = Date.now();
    const offline = await until('gpu-2', 'offline', 8000);
    // TTL, plus at most one sweep interval and a beat in flight.
    expect(Date.now() - stoppedAt).toBeLessThan((TTL_SECONDS + 2) * 1000);
    expect(offline.state_reason).toMatch(new RegExp(`^no heartbeat for ${TTL_SECONDS} s \\(last at \\d{4}-\\d\\d-\\d\\dT`));
    await new Promise((r) => setTimeout(r, 2500)); // several sweeps of both replicas
    expect(changesOf('gpu-2').filter((c) => c.to === 'offline')).toHaveLength(1);
    expect(changesOf('gpu-2').find((c) => c.to === 'offline')).toMatchObject({ from: 'ready' });

    const resume = keepBeating('gpu-2', 'default');
    expect((await until('gpu-2', 'ready')).state_reason).toBe('heartbeats resumed');
    resume();
    // Announced by the outbox relay just after the move commits.
    await waitFor('ready again announced', async () => changesOf('gpu-2').length >= 4);
    expect(changesOf('gpu-2').map((c) => c.to)).toEqual(['registered', 'ready', 'offline', 'ready']);
  });

  it('sends a registered machine that never heartbeats offline too', async () => {
    await join('gpu-3', 'default');
    const offline = await until('gpu-3', 'offline');
    expect(offline.state_reason).toBe(`no heartbeat within ${TTL_SECONDS} s of registering`);
  });

  it("holds a machine below its pool's network minimum unschedulable, with the reason, until a better test", async () => {
    await join('net-1', 'fast');
    const stop = keepBeating('net-1', 'fast');
    await until('net-1', 'ready'); // no test yet: the network does not count against it
    const test = (http: number, testedAt: string) =>
      messaging.publish(MACHINE_NETWORK_TESTED, {
        machineId: 'net-1',
        nats: { throughputMbps: 800, latencyMs: 2 },
        http: { throughputMbps: http, latencyMs: 3 },
        testedAt,
      });
    await test(40, new Date().toISOString());
    const held = await until('net-1', 'unschedulable');
    expect(held.state_reason).toBe('network 40 Mbps (http) is below pool "fast"\'s minimum of 100 Mbps');
    expect(held.network.test).toMatchObject({ http: { throughputMbps: 40 }, nats: { throughputMbps: 800 } });
    await waitFor('event', async () => changesOf('net-1').some((c) => c.to === 'unschedulable'));
    expect(changesOf('net-1').find((c) => c.to === 'unschedulable')!.reason).toBe(held.state_reason);

    // An older result arriving late changes nothing; a newer, faster one frees it.
    await test(900, new Date(Date.now() - 3_600_000).toISOString());
    await new Promise((r) => setTimeout(r, 1000));
    expect((await state('net-1')).state).toBe('unschedulable');
    await test(300, new Date().toISOString());
    expect((await until('net-1', 'ready')).state_reason).toBe('meets the requirements of pool "fast"');

    const shown = await call('GET', '/api/v1/machines/net-1', ADMIN);
    expect(shown.body.network).toMatchObject({ throughputMbps: 300, natsMbps: 800, httpMbps: 300, latencyMs: 2 });
    stop();
  });

  it('holds a machine whose GPUs the pool does not allow unschedulable, and follows pool changes', async () => {
    await join('a10-1', 'h100', ['NVIDIA A10G']);
    const stop = keepBeating('a10-1', 'h100');
    const held = await until('a10-1', 'unschedulable');
    expect(held.state_reason).toBe('GPU 0 (NVIDIA A10G) is not a type pool "h100" allows (H100)');
    // The relay announces the move after its commit: the row can be read before the event arrives.
    await waitFor('event', async () => changesOf('a10-1').some((c) => c.to === 'unschedulable'));
    expect(changesOf('a10-1').find((c) => c.to === 'unschedulable')).toMatchObject({ from: 'registered' });

    expect((await call('PATCH', '/api/v1/pools/h100', ADMIN, { allowedGpuTypes: ['H100', 'A10G'] })).status).toBe(200);
    await until('a10-1', 'ready');
    stop();
  });

  it('keeps a machine ready on beta9-style keepalives alone', async () => {
    const machineToken = await join('beta9-1', 'default');
    const keepalive = () =>
      call('POST', '/api/v1/machine/keepalive', machineToken, { machineId: 'beta9-1', metrics: { cpuUtilizationPct: 55 } });
    expect((await keepalive()).status).toBe(200);
    await until('beta9-1', 'ready');
    for (let i = 0; i < 8; i++) {
      await new Promise((r) => setTimeout(r, 500));
      expect((await keepalive()).status).toBe(200);
    }
    expect((await state('beta9-1')).state).toBe('ready');
    expect(changesOf('beta9-1').map((c) => c.to)).toEqual(['registered', 'ready']);
  });

  it('ignores malformed heartbeats and heartbeats from strangers without disturbing other machines', async () => {
    await join('steady-1', 'default');
    const stop = keepBeating('steady-1', 'default');
    await until('steady-1', 'ready');
    const bad = messaging.subject(MACHINE_BEAT, ['steady-1']);
    for (let i = 0; i < 5; i++) {
      nc.publish(bad, new TextEncoder().encode(JSON.stringify({ machineId: 'steady-1', cpuPercent: 900 })));
      nc.publish(bad, new TextEncoder().encode('garbage'));
    }
    await beat('stranger-1', 'default');
    await processes[1].waitForLog(/ignored an invalid message/).catch(() => processes[2].waitForLog(/ignored an invalid message/));
    await new Promise((r) => setTimeout(r, 3000)); // longer than the TTL
    expect((await state('steady-1')).state).toBe('ready');
    expect(await state('stranger-1')).toBeUndefined();
    expect(processes.every((p) => p.running)).toBe(true);
    stop();
  });
});
