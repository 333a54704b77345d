import { createTestSchema, type TestSchema, testEnv, uniqueName } from '../support/isolation.js';
import { deleteNamespaces } from '../support/nats.js';
import { freePort, ServiceProcess } from '../support/processes.js';

const ADMIN = `tern_${'o'.repeat(43)}`;

describe('gateway ops listener (OPS_PORT)', () => {
  let schema: TestSchema;
  let namespace: string;
  let gateway: ServiceProcess;
  let api: string;
  let ops: string;

  beforeAll(async () => {
    schema = await createTestSchema('ops');
    namespace = uniqueName('ops');
    const [apiPort, opsPort] = [await freePort(), await freePort()];
    api = `http://127.0.0.1:${apiPort}`;
    ops = `http://127.0.0.1:${opsPort}`;
    gateway = new ServiceProcess(
      'gateway',
      testEnv(schema, namespace, { HTTP_PORT: String(apiPort), OPS_PORT: String(opsPort), BOOTSTRAP_ADMIN_TOKEN: ADMIN }),
    ).start();
    await gateway.waitForLog(/\/metrics and \/health on http:\/\/127\.0\.0\.1:/, 60_000);
  });

  afterAll(async () => {
    await gateway?.stop();
    await schema?.drop();
    await deleteNamespaces(namespace);
  });

  it('serves /metrics and /health/* on the ops address only', async () => {
    const metrics = await fetch(`${ops}/metrics`);
    expect(metrics.status).toBe(200);
    expect(await metrics.text()).toContain('tern_process_cpu');
    expect((await fetch(`${ops}/health/live`)).status).toBe(200);
    expect((await fetch(`${ops}/health/self?x=1`)).status).toBe(200);
    for (const path of ['/metrics', '/metrics?x=1', '/health/live', '/health/ready', '/health/self']) {
      expect(`${path} ${(await fetch(`${api}${path}`)).status}`).toBe(`${path} 404`);
    }
  });

  it('serves the API on the API address only', async () => {
    const headers = { authorization: `Bearer ${ADMIN}` };
    expect((await fetch(`${api}/api/v1/workspace`, { headers })).status).toBe(200);
    expect((await fetch(`${ops}/api/v1/workspace`, { headers })).status).toBe(404);
  });
});
