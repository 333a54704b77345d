import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { NatsConnection, Subscription } from '@nats-io/transport-node';
import { jetstreamManager } from '@nats-io/jetstream';
import {
  MACHINE_BEAT,
  MACHINE_HEARTBEAT,
  MACHINE_NETWORK_TESTED,
  type MachineHeartbeat,
  type MachineNetworkTested,
  NETWORK_TEST_HTTP_MAX_BYTES,
  NETWORK_TEST_HTTP_PATH,
} from '#tern/contracts';
import { connectNats, Messaging, Namespace } from '#tern/messaging';
import { TEST_NATS, TEST_NATS_URL } from '../support/isolation.js';
import { freePort, waitFor } from '../support/processes.js';
import { ADMIN, AgentProcess, ControlPlane, removeStateDir, tempStateDir } from './harness.js';

interface Health {
  agents: { machineId: string; pool: string }[];
}

/** /proc/meminfo's view of memory in use, what the agent's memoryPercent should be near. */
function memoryInUsePercent(): number {
  const info = readFileSync('/proc/meminfo', 'utf8');
  const kb = (key: string) => Number(new RegExp(`^${key}:\\s+(\\d+)`, 'm').exec(info)?.[1]);
  return (1 - kb('MemAvailable') / kb('MemTotal')) * 100;
}

/**
 * The agent as a worker runs it, against a real gateway and scheduler: registration over HTTP
 * (admin token, join token, then its own machine token), NATS learnt from the answer, the
 * network test, heartbeats on the HEARTBEATS stream, presence, and the network-test routes.
 */
describe('agent joining a control plane', () => {
  let plane: ControlPlane;
  let nc: NatsConnection;
  let messaging: Messaging;
  let agent: AgentProcess;
  let metricsPort: number;
  const beats: MachineHeartbeat[] = [];
  const tests: MachineNetworkTested[] = [];
  const subs: Subscription[] = [];
  const stateDirs: string[] = [];

  beforeAll(async () => {
    plane = await ControlPlane.start('agentjoin', { MACHINE_HEARTBEAT_INTERVAL_SECONDS: '1', MACHINE_HEARTBEAT_TTL_SECONDS: '5' });
    nc = await connectNats({ ...TEST_NATS, name: 'agent-join-test' });
    messaging = new Messaging(nc, new Namespace(plane.namespace));
    subs.push(
      nc.subscribe(messaging.subject(MACHINE_BEAT, ['agent-a']), { callback: (_e, m) => void beats.push(m.json<MachineHeartbeat>()) }),
      nc.subscribe(messaging.subject(MACHINE_NETWORK_TESTED), { callback: (_e, m) => void tests.push(m.json<MachineNetworkTested>()) }),
    );
    metricsPort = await freePort();
    agent = AgentProcess.forPlane(plane, { MACHINE_ID: 'agent-a', POOL: 'default', HTTP_PORT: String(metricsPort) });
    stateDirs.push(agent.stateDir);
    agent.start();
    await agent.joined();
  }, 120_000);

  afterAll(async () => {
    subs.forEach((s) => s.unsubscribe());
    await agent?.stop();
    await nc?.close();
    await plane?.stop();
    stateDirs.forEach(removeStateDir);
  });

  it('registers with the admin token, keeps the machine token it is given, and boots NATS from the answer', async () => {
    const config = agent.configFile();
    expect(config).toMatchObject({ gateway: plane.base, pool: 'default', machineId: 'agent-a' });
    expect(config.token).toMatch(/^tern_machine_/);
    expect(config.replacedTokenSha256).toMatch(/^[0-9a-f]{64}$/);
    expect(statSync(join(agent.stateDir, 'config.yaml')).mode & 0o777).toBe(0o600);
    const registered = await agent.waitForLog(/^registered as agent-a/);
    expect(registered).toMatchObject({ namespace: plane.namespace, nats: [TEST_NATS_URL] });
  });

  it('shows up among the agents of /health/ready, and the scheduler makes it ready', async () => {
    await waitFor('agent listed', async () => {
      const res = await plane.call<Health>('GET', '/health/ready', undefined);
      return res.body.agents.some((a) => a.machineId === 'agent-a' && a.pool === 'default');
    });
    const machine = await waitFor('machine ready', async () => {
      const res = await plane.call('GET', '/api/v1/machines/agent-a');
      return res.body?.state === 'ready' ? res.body : undefined;
    });
    expect(machine).toMatchObject({ id: 'agent-a', pool: 'default', cpu: { threads: expect.any(Number) } });
    await agent.waitForLog((r) => /the scheduler moved this machine .*→ ready/.test(String(r.msg)));
  });

  it("heartbeats at the interval the gateway gave, with this machine's real CPU and memory use", async () => {
    await waitFor('5 heartbeats', async () => beats.length >= 5, 15_000);
    const recent = beats.slice(-5);
    for (let i = 1; i < recent.length; i++) {
      expect(recent[i].sequence).toBe(recent[i - 1].sequence + 1);
      expect(Date.parse(recent[i].sentAt) - Date.parse(recent[i - 1].sentAt)).toBeLessThan(2000);
    }
    // Scheduled against the agent's start, so a late beat is followed by an early one: the mean is the interval.
    const mean = (Date.parse(recent[4].sentAt) - Date.parse(recent[0].sentAt)) / 4;
    expect(mean).toBeGreaterThan(800);
    expect(mean).toBeLessThan(1300);
    for (const b of recent) {
      expect(b).toMatchObject({ machineId: 'agent-a', pool: 'default', gpus: [], runningContainers: [] });
      expect(b.cpuPercent).toBeGreaterThanOrEqual(0);
      expect(b.cpuPercent).toBeLessThanOrEqual(100);
    }
    expect(Math.abs(recent.at(-1)!.memoryPercent - memoryInUsePercent())).toBeLessThan(10);

    // Core NATS: stored nowhere (HEARTBEATS holds only the beats of agents before core-NATS beats).
    const jsm = await jetstreamManager(nc);
    const stored = await jsm.streams
      .getMessage(messaging.ns.stream('HEARTBEATS'), { last_by_subj: messaging.subject(MACHINE_HEARTBEAT, ['agent-a']) })
      .catch(() => null);
    expect(stored ?? null).toBeNull();
  });

  it('measured the network to the control plane over NATS and HTTP before taking work', async () => {
    await waitFor('network test', async () => tests.some((t) => t.machineId === 'agent-a'));
    const result = tests.find((t) => t.machineId === 'agent-a')!;
    for (const leg of [result.nats, result.http]) {
      expect(leg.error).toBeUndefined();
      expect(leg.throughputMbps).toBeGreaterThan(0);
      expect(leg.latencyMs).toBeGreaterThan(0);
    }
    const machine = await plane.call('GET', '/api/v1/machines/agent-a');
    expect(machine.body.network).toMatchObject({ natsMbps: result.nats.throughputMbps, httpMbps: result.http.throughputMbps });
  });

  it('serves /metrics and /health when HTTP_PORT is set', async () => {
    const live = await fetch(`http://127.0.0.1:${metricsPort}/health/live`);
    expect(live.status).toBe(200);
    const self = await fetch(`http://127.0.0.1:${metricsPort}/health/self`);
    expect(await self.json()).toMatchObject({ status: 'ok', info: { nats: { status: 'up' } } });
    const metrics = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
    expect(metrics).toMatch(/^tern_agent_heartbeats_total\{outcome="sent",service="agent"\} [1-9]/m);
    expect(metrics).toMatch(/^tern_agent_network_throughput_mbps\{path="http",service="agent"\} [0-9.]+/m);
    expect(metrics).toMatch(/^tern_agent_containers\{service="agent"\} 0/m);
  });

  it('serves the network-test routes to machine tokens only, and refuses oversize transfers (400 for a query, 413 for a body)', async () => {
    const token = agent.configFile().token;
    const url = `${plane.base}${NETWORK_TEST_HTTP_PATH}`;
    const auth = { authorization: `Bearer ${token}` };
    const octets = { ...auth, 'content-type': 'application/octet-stream' };

    const sink = await fetch(url, { method: 'POST', headers: octets, body: new Uint8Array(1_000_000) });
    expect(sink.status).toBe(200);
    expect(await sink.json()).toEqual({ receivedBytes: 1_000_000 });
    const source = await fetch(`${url}?bytes=123456`, { headers: auth });
    expect(source.status).toBe(200);
    expect((await source.arrayBuffer()).byteLength).toBe(123456);

    const tooMany = await fetch(`${url}?bytes=${NETWORK_TEST_HTTP_MAX_BYTES + 1}`, { headers: auth });
    expect(tooMany.status).toBe(400);
    expect(((await tooMany.json()) as { message: string[] }).message).toEqual([
      `bytes must not be greater than ${NETWORK_TEST_HTTP_MAX_BYTES}`,
    ]);
    expect((await fetch(`${url}?bytes=-1`, { headers: auth })).status).toBe(400);

    const tooBig = await fetch(url, { method: 'POST', headers: octets, body: new Uint8Array(NETWORK_TEST_HTTP_MAX_BYTES + 1) });
    expect(tooBig.status).toBe(413);
    expect(((await tooBig.json()) as { message: string }).message).toMatch(/limited to 33554432 bytes/);

    // Without a declared length (chunked), it is refused once past the bound; the gateway reads the rest, so the client sees the answer.
    const chunks = (function* () {
      for (let i = 0; i < 40; i++) yield new Uint8Array(1024 * 1024);
    })();
    const stream = new ReadableStream({
      pull(controller) {
        const next = chunks.next();
        if (next.done) controller.close();
        else controller.enqueue(next.value);
      },
    });
    const chunked = await fetch(url, { method: 'POST', headers: octets, body: stream, duplex: 'half' } as RequestInit);
    expect(chunked.status).toBe(413);
    expect(((await chunked.json()) as { message: string }).message).toMatch(/limited to 33554432 bytes/);

    expect(
      (await fetch(url, { method: 'POST', headers: { ...octets, authorization: `Bearer ${ADMIN}` }, body: new Uint8Array(10) })).status,
    ).toBe(401);
    expect((await fetch(`${url}?bytes=1`)).status).toBe(401);
  });

  it('registers again with its machine token after a restart, even with the spent token still in AGENT_TOKEN', async () => {
    await agent.stop();
    agent = new AgentProcess(agent.stateDir, agent.env).start();
    await agent.joined();
    expect(await agent.waitForLog(/^registering with/)).toMatchObject({ msg: expect.stringContaining('token from config.yaml') });
    await waitFor('agent listed again', async () => (await plane.call<Health>('GET', '/health/ready', undefined)).body.agents.length === 1);
  });

  it('joins with a one-time join token; the spent token then fails on a fresh machine with a clear error', async () => {
    const made = await plane.call('POST', '/api/v1/machines', ADMIN, { pool: 'default' });
    expect(made.status).toBe(201);
    const joiner = AgentProcess.forPlane(plane, { AGENT_TOKEN: made.body.joinToken });
    stateDirs.push(joiner.stateDir);
    joiner.start();
    try {
      await joiner.joined();
      expect(joiner.configFile()).toMatchObject({ machineId: made.body.machineId, token: expect.stringMatching(/^tern_machine_/) });
      await waitFor(
        'joined machine ready',
        async () => (await plane.call('GET', `/api/v1/machines/${made.body.machineId}`)).body?.state === 'ready',
      );
    } finally {
      await joiner.stop();
    }

    const again = AgentProcess.forPlane(plane, { AGENT_TOKEN: made.body.joinToken }, tempStateDir());
    stateDirs.push(again.stateDir);
    again.start();
    expect(await again.exitCode()).toBe(77);
    const stderr = again.lines.join('\n');
    expect(stderr).toMatch(/tern-agent: the gateway refused this machine \(401: join token already used/);
    expect(stderr).toMatch(/create a join token with `tern machine create --pool POOL`/);
  });

  it('stops with a configuration error when it has no gateway to register with', async () => {
    const lost = new AgentProcess(tempStateDir(), {});
    stateDirs.push(lost.stateDir);
    lost.start();
    expect(await lost.exitCode()).toBe(78);
    expect(lost.lines.join('\n')).toMatch(/no gateway configured: run `tern-agent init --gateway URL --token TOKEN --pool POOL`/);
  });

  it('keeps retrying, with back-off, while the gateway is unreachable', async () => {
    const nowhere = `http://127.0.0.1:${await freePort()}`;
    const early = new AgentProcess(tempStateDir(), { AGENT_GATEWAY_URL: nowhere, AGENT_TOKEN: ADMIN, MACHINE_ID: 'agent-late' });
    stateDirs.push(early.stateDir);
    early.start();
    try {
      const second = await early.waitForLog(/^registration attempt 2 failed/, 20_000);
      expect(second.msg).toBe(
        `registration attempt 2 failed: cannot reach ${nowhere}/api/v1/machine/register: ECONNREFUSED; retrying in 2 s`,
      );
      expect(early.running).toBe(true);
    } finally {
      await early.stop();
    }
  });
});
