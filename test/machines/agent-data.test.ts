import { createHash, randomUUID } from 'node:crypto';
import { bodyObjectName, connectNats, Messaging, Namespace, putBody } from '#tern/messaging';
import { agentTaskPermitPath, TASK_RESULT_MAX_BYTES } from '#tern/contracts';
import { ContainersRepository, createDataSource, TasksRepository } from '#tern/persistence';
import type { DataSource } from 'typeorm';
import { runningGateway } from '../support/gateway.js';
import { TEST_NATS } from '../support/isolation.js';
import { ADMIN, client, registration } from './harness.js';

/**
 * A machine fetches a code bundle over HTTPS with its machine token, and only while a container
 * whose version uses that code is placed on it: any other machine, a stopped placement or a
 * digest nobody uploaded gets the same 404.
 */
describe("the agent's data plane on the gateway (code bundles, large request bodies, large task results)", () => {
  const gateway = runningGateway('agcode', ADMIN);
  const call = (...args: Parameters<ReturnType<typeof client>>) => client(gateway.base)(...args);
  let db: DataSource;
  let containers: ContainersRepository;
  const bundle = Buffer.from('the bundle of app-1 (bytes as uploaded)');
  const digest = `sha256:${createHash('sha256').update(bundle).digest('hex')}`;
  const tokens: Record<string, string> = {};

  const fetchCode = (token: string | undefined, d = digest) =>
    fetch(`${gateway.base}/api/v1/agent/code/${d}`, { headers: token ? { authorization: `Bearer ${token}` } : {} });

  /** A deployment of the bundle with one container placed on m-placed, as the scheduler records it. */
  const deployAndPlace = async (name: string, kind: 'endpoint' | 'task_queue', containerId: string) => {
    const deployed = await call('POST', '/api/v1/deployments', ADMIN, { name, kind, handler: 'app.py:f', code: digest });
    expect(deployed.status).toBe(201);
    const [version] = (await db.query(`SELECT id FROM deployment_versions WHERE deployment_id = $1`, [deployed.body.deploymentId])) as {
      id: string;
    }[];
    await containers.insertScheduled({
      id: containerId,
      deploymentVersionId: version.id,
      machineId: 'm-placed',
      reason: 'test placement',
      requested: { cpuMillicores: 250, memoryBytes: 128 * 2 ** 20, gpuCount: 0 },
    });
  };

  beforeAll(async () => {
    db = await createDataSource({ url: gateway.schema.url, schema: gateway.schema.schema, runMigrations: false }).initialize();
    containers = new ContainersRepository(db);
    expect((await call('POST', '/api/v1/pools', ADMIN, { name: 'agcode' })).status).toBe(201);
    for (const machineId of ['m-placed', 'm-other']) {
      const made = await call('POST', '/api/v1/machines', ADMIN, { pool: 'agcode', machineId });
      const reg = await call('POST', '/api/v1/machine/register', made.body.joinToken, registration('agcode'));
      expect(reg.status).toBe(200);
      tokens[machineId] = reg.body.machineToken as string;
    }
    const put = await fetch(`${gateway.base}/api/v1/code/${digest}`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/gzip' },
      body: bundle,
    });
    expect(put.status).toBe(201);
    await deployAndPlace('app-1', 'endpoint', 'c-code');
  });

  afterAll(async () => {
    await db?.destroy();
  });

  it('serves the bundle to the machine its container is placed on', async () => {
    const res = await fetchCode(tokens['m-placed']);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('application/gzip');
    expect(Buffer.from(await res.arrayBuffer()).equals(bundle)).toBe(true);
  });

  it('answers 404 to another machine, for a digest nobody uploaded, and once the container stopped', async () => {
    const other = await fetchCode(tokens['m-other']);
    expect(other.status).toBe(404);
    const otherText = await other.text();
    const unknown = await fetchCode(tokens['m-placed'], `sha256:${'0'.repeat(64)}`);
    expect(unknown.status).toBe(404);
    // The same answer either way: a machine learns nothing about code that is not its own.
    expect(JSON.parse(otherText).message).toBe(`code ${digest} is not used by a container placed on this machine`);

    await containers.markStartFailed('c-code', 'test over');
    expect((await fetchCode(tokens['m-placed'])).status).toBe(404);
  });

  it('takes only a machine token, and a digest in the sha256:<hex> form', async () => {
    expect((await fetchCode(undefined)).status).toBe(401);
    expect((await fetchCode(ADMIN)).status).toBe(401);
    const bad = await fetchCode(tokens['m-placed'], 'sha256:XYZ');
    expect(bad.status).toBe(400);
  });

  it('serves a large request body once, to the machine the request was routed to only', async () => {
    const nc = await connectNats({ ...TEST_NATS, name: 'agent-data-test' });
    try {
      const messaging = new Messaging(nc, new Namespace(gateway.namespace));
      // What the gateway's invoke does with a body too large for one message routed to m-placed.
      const body = Buffer.alloc(3 * 2 ** 20, 7);
      await putBody(messaging, bodyObjectName('m-placed', 'req-big'), body);
      const fetchBody = (token: string, requestId = 'req-big') =>
        fetch(`${gateway.base}/api/v1/agent/bodies/${requestId}`, { headers: { authorization: `Bearer ${token}` } });

      const other = await fetchBody(tokens['m-other']);
      expect(other.status).toBe(404);
      expect(((await other.json()) as { message: string }).message).toMatch(/is not waiting for this machine/);
      const mine = await fetchBody(tokens['m-placed']);
      expect(mine.status).toBe(200);
      expect(Buffer.from(await mine.arrayBuffer()).equals(body)).toBe(true);
      // Read once: deleted as it was served.
      await new Promise((r) => setTimeout(r, 200));
      expect((await fetchBody(tokens['m-placed'])).status).toBe(404);
      expect((await fetch(`${gateway.base}/api/v1/agent/bodies/req-big`, { headers: { authorization: `Bearer ${ADMIN}` } })).status).toBe(
        401,
      );
    } finally {
      await nc.close();
    }
  });

  it('stores a large task result only from the machine holding the attempt lease, once, within the limit', async () => {
    await deployAndPlace('queue-1', 'task_queue', 'c-task');
    const submitted = await call('POST', '/taskqueue/queue-1', ADMIN, { x: 1 });
    expect(submitted.status).toBe(202);
    const taskId = submitted.body.task_id as string;
    const putResult = (token: string, attempt: number, body: Buffer, id = taskId) =>
      fetch(`${gateway.base}/api/v1/agent/tasks/${id}/attempts/${attempt}/result`, {
        method: 'PUT',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/octet-stream' },
        body,
      });
    const result = Buffer.from(JSON.stringify({ big: 'x'.repeat(100_000) }));

    // Not started yet: nobody holds the lease.
    expect((await putResult(tokens['m-placed'], 1, result)).status).toBe(403);
    // The lease as the gateway records it when it reads task.started.
    const tasks = new TasksRepository(db);
    expect(
      await tasks.markStarted({ taskId, attempt: 1, startedAt: new Date().toISOString(), containerId: 'c-task', machineId: 'm-placed' }),
    ).toBeDefined();

    const other = await putResult(tokens['m-other'], 1, result);
    expect(other.status).toBe(403);
    expect(((await other.json()) as { message: string }).message).toBe(
      `attempt 1 of task ${taskId} is not leased to this machine (now, or yet)`,
    );
    expect((await putResult(tokens['m-placed'], 2, result)).status).toBe(403);
    expect((await putResult(tokens['m-placed'], 1, result, randomUUID())).status).toBe(404);
    const tooBig = await putResult(tokens['m-placed'], 1, Buffer.alloc(TASK_RESULT_MAX_BYTES + 1, 0x20));
    expect(tooBig.status).toBe(413);
    expect(((await tooBig.json()) as { message: string }).message).toMatch(`limited to ${TASK_RESULT_MAX_BYTES} bytes`);

    const stored = await putResult(tokens['m-placed'], 1, result);
    expect(stored.status).toBe(201);
    expect(await stored.json()).toEqual({ resultRef: `${taskId}.1` });
    const again = await putResult(tokens['m-placed'], 1, Buffer.from('{"other":true}'));
    expect(again.status).toBe(409);
  });

  it('gives a task permit only for a machine token, a deployment id in UUID form, and a machine with a NATS key of its own', async () => {
    const [{ id }] = (await db.query(`SELECT id::text FROM deployments WHERE name = 'queue-1'`)) as { id: string }[];
    const permit = (token: string, deploymentId: string) =>
      fetch(`${gateway.base}${agentTaskPermitPath(deploymentId, 1)}`, { headers: { authorization: `Bearer ${token}` } });
    expect((await permit(ADMIN, id)).status).toBe(401);
    expect((await permit(tokens['m-placed'], 'not-a-uuid')).status).toBe(400);
    // These machines registered without a NATS key (test/security/attacks.test.ts has one that did).
    const keyless = await permit(tokens['m-placed'], id);
    expect(keyless.status).toBe(409);
    expect(((await keyless.json()) as { message: string }).message).toMatch(/no NATS user of its own/);
  });
});
