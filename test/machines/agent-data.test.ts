import { createHash } from 'node:crypto';
import { bodyObjectName, connectNats, Messaging, Namespace, putBody } from '#tern/messaging';
import { ContainersRepository, createDataSource } from '#tern/persistence';
import type { DataSource } from 'typeorm';
import { runningGateway } from '../support/gateway.js';
import { TEST_NATS } from '../support/isolation.js';
import { ADMIN, client, registration } from './harness.js';

/**
 * A machine fetches a code bundle over HTTPS with its machine token, and only while a container
 * whose version uses that code is placed on it: any other machine, a stopped placement or a
 * digest nobody uploaded gets the same 404.
 */
describe("the agent's data plane on the gateway (code bundles, large request bodies)", () => {
  const gateway = runningGateway('agcode', ADMIN);
  const call = (...args: Parameters<ReturnType<typeof client>>) => client(gateway.base)(...args);
  let db: DataSource;
  let containers: ContainersRepository;
  const bundle = Buffer.from('the bundle of app-1 (bytes as uploaded)');
  const digest = `sha256:${createHash('sha256').update(bundle).digest('hex')}`;
  const tokens: Record<string, string> = {};

  const fetchCode = (token: string | undefined, d = digest) =>
    fetch(`${gateway.base}/api/v1/agent/code/${d}`, { headers: token ? { authorization: `Bearer ${token}` } : {} });

  beforeAll(async () => {
    db = await createDataSource({ url: gateway.schema.url, schema: gateway.schema.schema }).initialize();
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
    const deployed = await call('POST', '/api/v1/deployments', ADMIN, {
      name: 'app-1',
      kind: 'endpoint',
      handler: 'app.py:f',
      code: digest,
    });
    expect(deployed.status).toBe(201);
    const [version] = (await db.query(`SELECT id FROM deployment_versions WHERE deployment_id = $1`, [deployed.body.deploymentId])) as {
      id: string;
    }[];
    // The scheduler's placement, as it records it.
    await containers.insertScheduled({
      id: 'c-code',
      deploymentVersionId: version.id,
      machineId: 'm-placed',
      reason: 'test placement',
      requested: { cpuMillicores: 250, memoryBytes: 128 * 2 ** 20, gpuCount: 0 },
    });
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
});
