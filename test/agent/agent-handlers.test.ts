import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { NatsConnection, Subscription } from '@nats-io/transport-node';
import { AGENT_CONTAINER_START, type ContainerStart } from '#tern/contracts';
import { connectNats, invoke, Messaging, Namespace } from '#tern/messaging';
import { createDataSource } from '#tern/persistence';
import type { DataSource } from 'typeorm';
import { TEST_NATS } from '../support/isolation.js';
import { waitFor } from '../support/processes.js';
import { describeNeeding } from '../support/real-parts.js';
import { ADMIN, AgentProcess, ControlPlane, removeStateDir } from './harness.js';

/** The user's folder: a handler that uses what on_start loaded. */
const APP = `
import os
state = {}
def load():
    state["model"] = open(os.path.join(os.path.dirname(__file__), "weights.txt")).read().strip()
def predict(payload):
    return {"model": state["model"], "sum": sum(payload["numbers"]), "cwd": os.getcwd()}
`;

const MACHINE = 'agent-handlers';
const WORKSPACE = 'ws-test';

/** tar.gz of a folder, as `tern deploy` uploads it; returns the bytes and "sha256:<hex>". */
function bundle(files: Record<string, string>): { data: Buffer; digest: string } {
  const dir = mkdtempSync(join(tmpdir(), 'tern-bundle-'));
  for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
  const archive = join(dir, '..', `${dir.split('/').at(-1)}.tar.gz`);
  execFileSync('tar', ['-czf', archive, '-C', dir, '.']);
  const data = readFileSync(archive);
  rmSync(dir, { recursive: true, force: true });
  rmSync(archive, { force: true });
  return { data, digest: `sha256:${createHash('sha256').update(data).digest('hex')}` };
}

function handlerStart(containerId: string, code: string): ContainerStart {
  return {
    containerId,
    deploymentId: 'dep-handler',
    deploymentVersion: 1,
    workspaceId: WORKSPACE,
    deploymentKind: 'endpoint',
    image: 'host',
    handler: 'app.py:predict',
    onStart: 'app.py:load',
    code,
    env: {},
    resources: { cpuMillicores: 500, memoryBytes: 256 * 1024 * 1024, gpuCount: 0 },
    volumes: [],
    ports: [8000],
    workers: 2,
    concurrency: 2,
    startupTimeoutSeconds: 30,
    requestedAt: new Date().toISOString(),
  };
}

(await describeNeeding(['root', 'runc', 'python3']))('agent running handlers from code bundles (runc, host image, Python runner)', () => {
  let plane: ControlPlane;
  let nc: NatsConnection;
  let messaging: Messaging;
  let agent: AgentProcess;
  let db: DataSource;
  const events: { subject: string; data: Record<string, unknown> }[] = [];
  const subs: Subscription[] = [];
  const kinds = (id: string) => events.filter((e) => e.data.containerId === id).map((e) => e.subject.split('.').at(-2));

  beforeAll(async () => {
    plane = await ControlPlane.start('agenthd', { MACHINE_HEARTBEAT_INTERVAL_SECONDS: '1', MACHINE_HEARTBEAT_TTL_SECONDS: '10' });
    nc = await connectNats({ ...TEST_NATS, name: 'agent-handlers-test' });
    messaging = new Messaging(nc, new Namespace(plane.namespace));
    db = await createDataSource({ url: plane.schema.url, schema: plane.schema.schema, runMigrations: false }).initialize();
    subs.push(
      nc.subscribe(`${plane.namespace}.container.${MACHINE}.*.v1`, {
        callback: (_e, m) => void events.push({ subject: m.subject, data: m.json() }),
      }),
    );
    agent = AgentProcess.forPlane(plane, { MACHINE_ID: MACHINE });
    // The container runs as nobody: it must be able to reach <state dir>/code/<hex>.
    chmodSync(agent.stateDir, 0o755);
    agent.start();
    await agent.joined();
  }, 120_000);

  afterAll(async () => {
    subs.forEach((s) => s.unsubscribe());
    await agent?.stop(30_000);
    await db?.destroy();
    await nc?.close();
    await plane?.stop();
    if (agent) removeStateDir(agent.stateDir);
  });

  it('fetches the code bundle from the gateway for the container placed on it, runs the handler in the Python runner (on_start first) and answers invokes over NATS', async () => {
    const { data, digest } = bundle({ 'app.py': APP, 'weights.txt': 'tiny-model-v1\n' });
    const put = await fetch(`${plane.base}/api/v1/code/${digest}`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/gzip' },
      body: data,
    });
    expect(put.status).toBe(201);
    const deployed = await plane.call('POST', '/api/v1/deployments', ADMIN, {
      name: 'handler-app',
      kind: 'endpoint',
      handler: 'app.py:predict',
      on_start: 'app.py:load',
      code: digest,
      cpu: 0.5,
      memory: '256Mi',
      workers: 2,
    });
    expect(deployed.status).toBe(201);
    const deploymentId = deployed.body.deploymentId as string;
    // One container wanted, as the autoscaler would decide: the scheduler places it on the agent,
    // whose start fetches the bundle over HTTPS (the gateway checks that placement).
    await db.query(`UPDATE deployment_versions SET desired_containers = 1 WHERE deployment_id = $1`, [deploymentId]);
    const ofApp = () => events.filter((e) => e.data.deploymentId === deploymentId);
    await waitFor('ready', async () => ofApp().some((e) => /\.(ready|failed)\.v1$/.test(e.subject)), 60_000);
    const containerId = String(ofApp()[0].data.containerId);
    expect(kinds(containerId)).toEqual(['scheduled', 'starting', 'started', 'ready']);

    const res = await invoke(
      messaging,
      { machineId: MACHINE, containerId },
      {
        requestId: 'r-1',
        deploymentId,
        method: 'POST',
        path: '/',
        headers: { 'content-type': 'application/json' },
        timeoutMs: 10_000,
      },
      new TextEncoder().encode(JSON.stringify({ numbers: [1, 2, 3.5] })),
    );
    expect(res.status).toBe(200);
    let text = '';
    for await (const chunk of res.body) text += Buffer.from(chunk).toString();
    expect(JSON.parse(text)).toEqual({ model: 'tiny-model-v1', sum: 6.5, cwd: '/app' });

    // A body too large for one message: the agent fetches it from the gateway, which serves it to this machine once.
    const many = new TextEncoder().encode(JSON.stringify({ numbers: Array.from({ length: 600_000 }, () => 1) }));
    expect(many.length).toBeGreaterThan(1024 * 1024);
    const big = await invoke(
      messaging,
      { machineId: MACHINE, containerId },
      { requestId: 'r-big', deploymentId, method: 'POST', path: '/', headers: { 'content-type': 'application/json' }, timeoutMs: 20_000 },
      many,
    );
    expect(big.status).toBe(200);
    let bigText = '';
    for await (const chunk of big.body) bigText += Buffer.from(chunk).toString();
    expect(JSON.parse(bigText)).toMatchObject({ sum: 600_000 });

    // Cached by digest, extracted read-only for the container.
    const hex = digest.slice('sha256:'.length);
    expect(readFileSync(join(agent.stateDir, 'code', hex, 'weights.txt'), 'utf8')).toBe('tiny-model-v1\n');

    expect((await plane.call('POST', '/api/v1/deployments/handler-app/stop', ADMIN)).status).toBeLessThan(300);
    await waitFor('stopped', async () => kinds(containerId).includes('stopped'), 30_000);
    // Gone with the container: nobody serves its invoke subject any more.
    await expect(
      invoke(
        messaging,
        { machineId: MACHINE, containerId },
        { requestId: 'r-2', deploymentId, method: 'POST', path: '/', headers: {}, timeoutMs: 2000 },
        new Uint8Array(),
      ),
    ).rejects.toMatchObject({ code: 503 });
  }, 120_000);

  it('fails the start with a clear reason when the gateway does not serve the bundle (no container using it is placed here)', async () => {
    const missing = `sha256:${'0'.repeat(64)}`;
    expect(await messaging.request(AGENT_CONTAINER_START, handlerStart('c-nocode', missing), { tokens: [MACHINE] })).toEqual({
      accepted: true,
    });
    await waitFor('failed', async () => kinds('c-nocode').includes('failed'), 20_000);
    const failed = events.find((e) => e.data.containerId === 'c-nocode' && e.subject.endsWith('.failed.v1'))!.data;
    expect(failed).toMatchObject({
      phase: 'image',
      error: expect.stringContaining(`code bundle sha256:${'0'.repeat(64)}: the gateway answered 404`),
    });
  }, 40_000);
});
