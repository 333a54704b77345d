import { chmodSync } from 'node:fs';
import { join } from 'node:path';
import type { NatsConnection, Subscription } from '@nats-io/transport-node';
import {
  AGENT_CONTAINER_START,
  AGENT_CONTAINER_STOP,
  CONTAINER_LOG_LINE,
  type ContainerLogLine,
  type ContainerStart,
  MACHINE_BEAT,
  type MachineHeartbeat,
  subjectFilter,
} from '#tern/contracts';
import { connectNats, Messaging, Namespace } from '#tern/messaging';
import { ImageStore, RuncRuntime } from '#tern/runtime';
import { TEST_NATS } from '../support/isolation.js';
import { waitFor } from '../support/processes.js';
import { describeNeeding } from '../support/real-parts.js';
import { AgentProcess, ControlPlane, removeStateDir } from './harness.js';

/**
 * A tiny container-contract program: prints its env, serves GET /health on $PORT, and exits with EXIT_CODE after LIFETIME seconds.
 */
const APP = `
import os, sys, threading, time
from http.server import BaseHTTPRequestHandler, HTTPServer
print("greeting:", os.environ.get("GREETING"), flush=True)
print("a warning", file=sys.stderr, flush=True)
class Health(BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == "/health" else 404)
        self.end_headers()
    def log_message(self, *args):
        pass
server = HTTPServer(("0.0.0.0", int(os.environ["PORT"])), Health)
threading.Thread(target=server.serve_forever, daemon=True).start()
time.sleep(float(os.environ.get("LIFETIME", "2")))
print("bye", flush=True)
sys.exit(int(os.environ.get("EXIT_CODE", "0")))
`;

const MACHINE = 'agent-rt';
const WORKSPACE = 'ws-test';

function startCommand(containerId: string, env: Record<string, string>): ContainerStart {
  return {
    containerId,
    deploymentId: 'dep-hello',
    deploymentVersion: 1,
    workspaceId: WORKSPACE,
    deploymentKind: 'endpoint',
    image: 'host',
    command: ['python3', '-c', APP],
    env,
    resources: { cpuMillicores: 500, memoryBytes: 256 * 1024 * 1024, gpuCount: 0 },
    // Volumes come from the gateway's volume store (test/volumes/volume-mounts.test.ts).
    volumes: [],
    ports: [8000],
    workers: 1,
    concurrency: 1,
    startupTimeoutSeconds: 30,
    requestedAt: new Date().toISOString(),
  };
}

(await describeNeeding(['root', 'runc', 'python3']))('agent running containers (runc, host image)', () => {
  let plane: ControlPlane;
  let nc: NatsConnection;
  let messaging: Messaging;
  let agent: AgentProcess;
  const events: { subject: string; data: Record<string, unknown> }[] = [];
  const logs: ContainerLogLine[] = [];
  const beats: MachineHeartbeat[] = [];
  const subs: Subscription[] = [];

  const eventsOf = (containerId: string) => events.filter((e) => e.data.containerId === containerId);
  const kinds = (containerId: string) => eventsOf(containerId).map((e) => e.subject.split('.').at(-2));
  const runtime = () => {
    const dir = agent.stateDir;
    return new RuncRuntime({
      stateDir: join(dir, 'runtime'),
      images: new ImageStore({ root: join(dir, 'images') }),
      volumeRoot: join(dir, 'volumes'),
    });
  };

  beforeAll(async () => {
    plane = await ControlPlane.start('agentrt', { MACHINE_HEARTBEAT_INTERVAL_SECONDS: '1', MACHINE_HEARTBEAT_TTL_SECONDS: '10' });
    nc = await connectNats({ ...TEST_NATS, name: 'agent-containers-test' });
    messaging = new Messaging(nc, new Namespace(plane.namespace));
    subs.push(
      nc.subscribe(`${plane.namespace}.container.${MACHINE}.*.v1`, {
        callback: (_e, m) => void events.push({ subject: m.subject, data: m.json() }),
      }),
      // Only what the agent publishes under its own machine id counts: that is all its NATS identity may publish.
      nc.subscribe(messaging.ns.subject(subjectFilter(CONTAINER_LOG_LINE, MACHINE, 'dep-hello', undefined)), {
        callback: (_e, m) => {
          const line = m.json<ContainerLogLine>();
          if (m.subject.split('.').at(-2) === line.containerId) logs.push(line);
        },
      }),
      nc.subscribe(messaging.subject(MACHINE_BEAT, [MACHINE]), { callback: (_e, m) => void beats.push(m.json<MachineHeartbeat>()) }),
    );
    agent = AgentProcess.forPlane(plane, { MACHINE_ID: MACHINE });
    chmodSync(agent.stateDir, 0o755);
    agent.start();
    await agent.joined();
  }, 120_000);

  afterAll(async () => {
    subs.forEach((s) => s.unsubscribe());
    await agent?.stop(30_000);
    for (const c of await runtime()
      .list()
      .catch(() => []))
      await runtime()
        .remove(c.id)
        .catch(() => undefined);
    await nc?.close();
    await plane?.stop();
    if (agent) removeStateDir(agent.stateDir);
  });

  it('runs a start command: env reaches the program, its log lines arrive over NATS, its exit code is reported', async () => {
    const reply = await messaging.request(
      AGENT_CONTAINER_START,
      startCommand('c-hello', { GREETING: 'hello tern', LIFETIME: '2', EXIT_CODE: '3' }),
      {
        tokens: [MACHINE],
      },
    );
    expect(reply).toEqual({ accepted: true });

    await waitFor('stopped event', async () => kinds('c-hello').includes('stopped'), 30_000);
    expect(kinds('c-hello')).toEqual(['starting', 'started', 'ready', 'failed', 'stopped']);
    const [starting, started, ready, failed, stopped] = eventsOf('c-hello').map((e) => e.data);
    expect(starting).toMatchObject({ machineId: MACHINE, deploymentId: 'dep-hello', deploymentVersion: 1, workspaceId: WORKSPACE });
    expect(started).toMatchObject({
      resources: { cpuMillicores: 500, memoryBytes: 256 * 1024 * 1024, gpuCount: 0 },
      startupLatencyMs: expect.any(Number),
    });
    expect(ready.readyLatencyMs).toBeGreaterThanOrEqual(started.startupLatencyMs as number);
    expect(failed).toMatchObject({ phase: 'runtime', error: 'exited with code 3' });
    expect(stopped).toMatchObject({ exitCode: 3, oomKilled: false, reason: 'exited' });

    const lines = logs.filter((l) => l.containerId === 'c-hello');
    expect(lines.map((l) => [l.stream, l.line])).toEqual(
      expect.arrayContaining([
        ['stdout', 'greeting: hello tern'],
        ['stderr', 'a warning'],
        ['stdout', 'bye'],
      ]),
    );
    expect(lines.map((l) => l.sequence).sort((a, b) => a - b)).toEqual(lines.map((_, i) => i));
    // Reported, then removed from the runtime.
    await waitFor('removed', async () => !(await runtime().list()).some((c) => c.id === 'c-hello'));
  });

  it('stops a container on command, and stopping an unknown one is accepted (idempotent)', async () => {
    await messaging.request(AGENT_CONTAINER_START, startCommand('c-stop', { LIFETIME: '600' }), { tokens: [MACHINE] });
    await waitFor('ready', async () => kinds('c-stop').includes('ready'), 30_000);
    await waitFor('heartbeat lists it', async () => beats.at(-1)?.runningContainers.includes('c-stop'));
    const reply = await messaging.request(
      AGENT_CONTAINER_STOP,
      { containerId: 'c-stop', graceSeconds: 1, reason: 'scale-down' },
      { tokens: [MACHINE] },
    );
    expect(reply).toEqual({ accepted: true });
    await waitFor('stopped', async () => kinds('c-stop').includes('stopped'), 30_000);
    expect(eventsOf('c-stop').at(-1)!.data).toMatchObject({ reason: 'stop command: scale-down', oomKilled: false });
    expect(kinds('c-stop')).not.toContain('failed');
    expect(
      await messaging.request(AGENT_CONTAINER_STOP, { containerId: 'c-stop', graceSeconds: 1, reason: 'again' }, { tokens: [MACHINE] }),
    ).toMatchObject({ accepted: true });
  });

  it('serves commands for its own machine id only', async () => {
    const other = messaging.request(AGENT_CONTAINER_START, startCommand('c-other', {}), { tokens: ['someone-else'], timeoutMs: 1000 });
    await expect(other).rejects.toMatchObject({ code: 503 });
    const bad = messaging.request(
      AGENT_CONTAINER_START,
      { ...startCommand('c-bad', {}), resources: { cpuMillicores: 1, memoryBytes: 1, gpuCount: 1 } },
      { tokens: [MACHINE] },
    );
    await expect(bad).resolves.toEqual({ accepted: false, reason: 'needs 1 GPU(s); this machine has 0, 0 free' });
  });

  it('after kill -9 and a restart, adopts its own running container and kills the one nobody knows', async () => {
    await messaging.request(AGENT_CONTAINER_START, startCommand('c-keep', { LIFETIME: '600' }), { tokens: [MACHINE] });
    await waitFor('ready', async () => kinds('c-keep').includes('ready'), 30_000);
    expect(await agent.kill('SIGKILL')).toBe(null);

    // A container in the agent's runtime that no Tern start command made.
    await runtime().start({ id: 'stranger', image: 'host', args: ['sleep', '600'], labels: { note: 'not tern' } });
    expect((await runtime().list()).map((c) => [c.id, c.status]).sort()).toEqual([
      ['c-keep', 'running'],
      ['stranger', 'running'],
    ]);

    agent = new AgentProcess(agent.stateDir, agent.env).start();
    await agent.joined();
    await agent.waitForLog(/^adopted container c-keep/);
    await agent.waitForLog(/^killed container stranger: not one of this machine's/);
    expect((await runtime().list()).map((c) => [c.id, c.status])).toEqual([['c-keep', 'running']]);
    await waitFor('heartbeat lists the adopted container', async () => beats.at(-1)?.runningContainers.join() === 'c-keep');

    // Still under the agent's control: a stop command ends it and it is reported.
    await messaging.request(AGENT_CONTAINER_STOP, { containerId: 'c-keep', graceSeconds: 1, reason: 'test over' }, { tokens: [MACHINE] });
    await waitFor('stopped', async () => kinds('c-keep').includes('stopped'), 30_000);
    await waitFor('nothing left', async () => (await runtime().list()).length === 0);
  });
});
