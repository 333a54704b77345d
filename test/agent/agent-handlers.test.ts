import { randomBytes } from 'node:crypto';
import { chmodSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { NatsConnection, Subscription } from '@nats-io/transport-node';
import { AGENT_CONTAINER_START, type ContainerStart, type DeploymentDetail } from '#tern/contracts';
import { connectNats, invoke, Messaging, Namespace } from '#tern/messaging';
import { createDataSource } from '#tern/persistence';
import type { DataSource } from 'typeorm';
import { TEST_NATS } from '../support/isolation.js';
import { waitFor } from '../support/processes.js';
import { describeNeeding } from '../support/real-parts.js';
import { renderDeployment } from '../../apps/cli/src/commands/deployments.js';
import { ADMIN, AgentProcess, bundle, ControlPlane, removeStateDir, uploadBundle } from './harness.js';

/** The user's folder: a handler that uses what on_start loaded. */
const APP = `
import os
state = {}
def load():
    state["model"] = open(os.path.join(os.path.dirname(__file__), "weights.txt")).read().strip()
def predict(payload):
    return {"model": state["model"], "sum": sum(payload["numbers"]), "cwd": os.getcwd()}
`;

/** A command server of the user's: reads a file of its folder (it runs in /app) and is ready on /ready, not /health. */
const SERVER = `
import os
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
model = open("model.txt").read().strip()
class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        body = f"{os.getcwd()} {model} {os.environ.get('HF_TOKEN')}".encode()
        self.send_response(200 if self.path in ("/ready", "/where") else 404)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
ThreadingHTTPServer(("0.0.0.0", int(os.environ["PORT"])), Handler).serve_forever()
`;

/** A command server that crashes as it starts, saying why on stderr. */
const CRASHER = `
import sys
print("loading the model", flush=True)
print("boom: no weights", file=sys.stderr, flush=True)
sys.exit(3)
`;

/** The scheduler's crash back-off in these tests: 0.5 s doubling to 4 s (the default is 1 s to 5 min). */
const CRASH_BACKOFF = { firstMs: 500, maxMs: 4000 };

const MACHINE = 'agent-handlers';
const WORKSPACE = 'ws-test';

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

(await describeNeeding(['root', 'runc', 'python3']))('agent running handlers and command servers (runc, host image)', () => {
  let plane: ControlPlane;
  let nc: NatsConnection;
  let messaging: Messaging;
  let agent: AgentProcess;
  let db: DataSource;
  const events: { subject: string; data: Record<string, unknown> }[] = [];
  const subs: Subscription[] = [];
  const kinds = (id: string) => events.filter((e) => e.data.containerId === id).map((e) => e.subject.split('.').at(-2));

  beforeAll(async () => {
    plane = await ControlPlane.start('agenthd', {
      MACHINE_HEARTBEAT_INTERVAL_SECONDS: '1',
      MACHINE_HEARTBEAT_TTL_SECONDS: '10',
      CONTAINER_CRASH_BACKOFF_FIRST_MS: String(CRASH_BACKOFF.firstMs),
      CONTAINER_CRASH_BACKOFF_MAX_MS: String(CRASH_BACKOFF.maxMs),
      SECRETS_KEY: randomBytes(32).toString('base64'),
    });
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
    const app = bundle({ 'app.py': APP, 'weights.txt': 'tiny-model-v1\n' });
    const digest = app.digest;
    expect(await uploadBundle(plane.base, app)).toBe(201);
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

  /** Deploys a command server from a folder and asks for one container of the new version; answers the deployment id and version. */
  async function deployCommand(spec: Record<string, unknown>, files: Record<string, string>): Promise<{ id: string; version: number }> {
    const app = bundle(files);
    expect(await uploadBundle(plane.base, app)).toBe(201);
    const deployed = await plane.call('POST', '/api/v1/deployments', ADMIN, {
      kind: 'endpoint',
      cpu: 0.5,
      memory: '128Mi',
      ...spec,
      code: app.digest,
    });
    expect(deployed.status).toBe(201);
    const { deploymentId: id, version } = deployed.body as { deploymentId: string; version: number };
    await db.query(`UPDATE deployment_versions SET desired_containers = 1 WHERE deployment_id = $1 AND version = $2`, [id, version]);
    return { id, version };
  }
  const eventsOf = (deploymentId: string, kind: string, version?: number) =>
    events.filter(
      (e) =>
        e.data.deploymentId === deploymentId &&
        e.subject.endsWith(`.${kind}.v1`) &&
        (version === undefined || e.data.deploymentVersion === version),
    );

  it("runs a command server in its uploaded folder, ready when its own health_path answers, with the workspace's secrets in its environment only", async () => {
    const token = `hf_${randomBytes(12).toString('hex')}`;
    expect((await plane.call('PUT', '/api/v1/secrets/HF_TOKEN', ADMIN, { value: token })).status).toBe(200);
    // Naming a secret the workspace lacks is refused at deploy, not at every start.
    const missing = await plane.call('POST', '/api/v1/deployments', ADMIN, {
      name: 'own-server',
      kind: 'endpoint',
      command: ['python3', 'server.py'],
      secrets: ['OPENAI_KEY'],
    });
    expect([missing.status, String(missing.body.message)]).toEqual([400, expect.stringMatching(/secrets: OPENAI_KEY not found/)]);
    const { id } = await deployCommand(
      { name: 'own-server', command: ['python3', 'server.py'], health_path: '/ready', secrets: ['HF_TOKEN'] },
      { 'server.py': SERVER, 'model.txt': 'tiny-model-v2\n' },
    );
    await waitFor('ready', async () => eventsOf(id, 'ready').length + eventsOf(id, 'failed').length > 0, 30_000);
    expect(eventsOf(id, 'failed')).toEqual([]);
    const containerId = String(eventsOf(id, 'ready')[0].data.containerId);
    const res = await invoke(
      messaging,
      { machineId: MACHINE, containerId },
      { requestId: 'r-where', deploymentId: id, method: 'GET', path: '/where', headers: {}, timeoutMs: 10_000 },
      new Uint8Array(),
    );
    let text = '';
    for await (const chunk of res.body) text += Buffer.from(chunk).toString();
    expect([res.status, text]).toEqual([200, `/app tiny-model-v2 ${token}`]);
    // Nowhere else: not in the API's answers, the container events, or any service's or the agent's logs.
    const seen = [
      JSON.stringify((await plane.call('GET', '/api/v1/deployments/own-server', ADMIN)).body),
      JSON.stringify((await plane.call('GET', '/api/v1/deployments', ADMIN)).body),
      JSON.stringify((await plane.call('GET', '/api/v1/secrets', ADMIN)).body),
      JSON.stringify(events),
      ...plane.processes.flatMap((p) => p.lines),
      ...agent.lines,
    ];
    expect(seen.filter((s) => s.includes(token))).toEqual([]);
    expect((await plane.call('POST', '/api/v1/deployments/own-server/stop', ADMIN)).status).toBeLessThan(300);
  }, 60_000);

  it("keeps a failing task's remote traceback with the task and does not retry an error its policy names", async () => {
    const worker = bundle({
      'work.py': 'def run(p):\n    if p.get("bad"):\n        raise ValueError("bad input: " + p["bad"])\n    return p\n',
    });
    expect(await uploadBundle(plane.base, worker)).toBe(201);
    const deployed = await plane.call('POST', '/api/v1/deployments', ADMIN, {
      name: 'worker',
      kind: 'task_queue',
      handler: 'work.py:run',
      code: worker.digest,
      cpu: 0.5,
      memory: '128Mi',
      task_policy: { max_retries: 3, no_retry_on: ['ValueError'] },
    });
    expect(deployed.status).toBe(201);
    await db.query(`UPDATE deployment_versions SET desired_containers = 1 WHERE deployment_id = $1`, [deployed.body.deploymentId]);
    const submitted = await fetch(`${plane.base}/taskqueue/worker`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ bad: 'seven' }),
    });
    expect(submitted.status).toBe(202);
    const { task_id: taskId } = (await submitted.json()) as { task_id: string };
    const task = await waitFor(
      'the task failed',
      async () => {
        const { body } = await plane.call<{ status: string; attempts: number; error: string | null }>('GET', `/api/v1/tasks/${taskId}`);
        return body.status === 'ERROR' && body;
      },
      60_000,
    );
    // One attempt of four: ValueError is named in no_retry_on.
    expect(task.attempts).toBe(1);
    expect(task.error).toMatch(
      /^ValueError: bad input: seven\n\nRemote traceback:\nTraceback \(most recent call last\):[\s\S]*work\.py", line 3, in run[\s\S]*ValueError: bad input: seven$/,
    );
    expect((await plane.call('POST', '/api/v1/deployments/worker/stop', ADMIN)).status).toBeLessThan(300);
  }, 90_000);

  it('backs off a crash loop (each start waits longer after the last crash), shows it with the exit code and last lines, and stops it once superseded', async () => {
    const { id } = await deployCommand({ name: 'crasher', command: ['python3', 'crash.py'] }, { 'crash.py': CRASHER });
    await waitFor('a first start', async () => eventsOf(id, 'scheduled').length > 0, 20_000);
    const t0 = Date.parse(String(eventsOf(id, 'scheduled')[0].data.at));
    // 15 s of the loop: with 0.5 s doubling to 4 s about 5 starts (the default's 1 s to 5 min keeps 2 minutes to 7).
    await new Promise((r) => setTimeout(r, t0 + 15_000 - Date.now()));
    const starts = eventsOf(id, 'scheduled').map((e) => Date.parse(String(e.data.at)));
    const crashes = eventsOf(id, 'failed');
    expect(starts.length).toBeGreaterThanOrEqual(3);
    expect(starts.length).toBeLessThanOrEqual(8);
    expect(crashes[0].data).toMatchObject({ phase: 'runtime', exitCode: 3, lastLines: expect.arrayContaining(['! boom: no weights']) });
    // Every start after the k-th crash waited at least the back-off of k crashes.
    for (let k = 1; k < starts.length; k++) {
      const crashAt = Date.parse(String(crashes[k - 1].data.at));
      expect(starts[k] - crashAt).toBeGreaterThanOrEqual(Math.min(CRASH_BACKOFF.maxMs, CRASH_BACKOFF.firstMs * 2 ** (k - 1)) - 5);
    }
    // What `tern deployments crasher` reads and prints.
    const detail = await waitFor(
      'the loop in the API',
      async () => {
        const { body } = await plane.call<DeploymentDetail>('GET', '/api/v1/deployments/crasher');
        return /^CrashLoopBackOff: /.test(body.reason ?? '') && body;
      },
      10_000,
    );
    expect(detail.versions[0].crashLoop).toMatchObject({
      state: 'CrashLoopBackOff',
      crashes: expect.any(Number),
      phase: 'runtime',
      exitCode: 3,
      lastLines: expect.arrayContaining(['loading the model', '! boom: no weights']),
    });
    expect(renderDeployment(detail)).toMatch(
      /v1: CrashLoopBackOff: \d+ container\(s\) crashed in a row; .*exit code 3[\s\S]*! boom: no weights/,
    );

    // A new version: the old one's crashing containers stop at once, none start again, however long it would be kept warm.
    const { version } = await deployCommand(
      { name: 'crasher', command: ['python3', 'server.py'], health_check: 'tcp' },
      { 'server.py': SERVER, 'model.txt': 'fixed\n' },
    );
    const t1 = Date.now();
    await waitFor('the new version ready', async () => eventsOf(id, 'ready', version).length > 0, 30_000);
    await waitFor(
      'the old version stopped',
      async () => {
        const [{ n }] = await db.query(
          `SELECT count(*)::int AS n FROM containers c JOIN deployment_versions dv ON dv.id = c.deployment_version_id
           WHERE dv.deployment_id = $1 AND dv.version = 1 AND c.state IN ('scheduled', 'starting', 'running')`,
          [id],
        );
        return n === 0;
      },
      5000,
    );
    await new Promise((r) => setTimeout(r, 2000));
    expect(eventsOf(id, 'scheduled', 1).filter((e) => Date.parse(String(e.data.at)) > t1 + 1000)).toEqual([]);
    expect((await plane.call('POST', '/api/v1/deployments/crasher/stop', ADMIN)).status).toBeLessThan(300);
  }, 90_000);
});
