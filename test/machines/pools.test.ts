import { createHash } from 'node:crypto';
import { createTestSchema, type TestSchema, testEnv, uniqueName } from '../support/isolation.js';
import { deleteNamespaces } from '../support/nats.js';
import { freePort, ServiceProcess } from '../support/processes.js';
import { ADMIN, client, tern } from './harness.js';

describe('pools API and CLI', () => {
  let schema: TestSchema;
  let namespace: string;
  let gateway: ServiceProcess;
  let base: string;
  let call: ReturnType<typeof client>;
  let member: string;

  beforeAll(async () => {
    schema = await createTestSchema('pools');
    namespace = uniqueName('pools');
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    call = client(base);
    gateway = new ServiceProcess('gateway', testEnv(schema, namespace, { HTTP_PORT: String(port), BOOTSTRAP_ADMIN_TOKEN: ADMIN })).start();
    await gateway.ready();
    member = (await call('POST', '/api/v1/tokens', ADMIN, { name: 'reader' })).body.token;
  });

  afterAll(async () => {
    await gateway?.stop();
    await schema?.drop();
    await deleteNamespaces(namespace);
  });

  it('has the default pool, with no rules', async () => {
    const list = await call('GET', '/api/v1/pools', member);
    expect(list.status).toBe(200);
    expect(list.body).toEqual([
      expect.objectContaining({
        name: 'default',
        allowedGpuTypes: [],
        minNetworkMbps: null,
        minReputation: null,
        machines: { total: 0, byState: {} },
      }),
    ]);
  });

  it('creates, reads and updates a pool; only admins may change pools', async () => {
    const body = { name: 'h100-eu', allowedGpuTypes: ['H100'], minNetworkMbps: 500, minReputation: 0.9 };
    expect((await call('POST', '/api/v1/pools', member, body)).status).toBe(403);
    const created = await call('POST', '/api/v1/pools', ADMIN, body);
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject(body);

    const again = await call('POST', '/api/v1/pools', ADMIN, body);
    expect(again.status).toBe(409);
    expect(again.body.message).toBe('pool "h100-eu" already exists');

    expect((await call('GET', '/api/v1/pools/h100-eu', member)).body).toMatchObject(body);

    const patched = await call('PATCH', '/api/v1/pools/h100-eu', ADMIN, { allowedGpuTypes: ['H100', 'A100'], minReputation: null });
    expect(patched.status).toBe(200);
    expect(patched.body).toMatchObject({ allowedGpuTypes: ['H100', 'A100'], minNetworkMbps: 500, minReputation: null });
    expect((await call('PATCH', '/api/v1/pools/h100-eu', member, { minNetworkMbps: 1 })).status).toBe(403);
  });

  it('answers 404 naming an unknown pool', async () => {
    const missing = await call('GET', '/api/v1/pools/nowhere', member);
    expect(missing.status).toBe(404);
    expect(missing.body.message).toMatch(/^pool "nowhere" not found/);
    expect((await call('PATCH', '/api/v1/pools/nowhere', ADMIN, { minNetworkMbps: 1 })).status).toBe(404);
  });

  it('rejects bad bodies with 400 naming the field and the rule', async () => {
    const bad = await call('POST', '/api/v1/pools', ADMIN, {
      name: 'Bad Name',
      allowedGpuTypes: 'H100',
      minNetworkMbps: -5,
      minReputation: 1.5,
      color: 'red',
    });
    expect(bad.status).toBe(400);
    expect(bad.body.message).toEqual(
      expect.arrayContaining([
        'name must be 1-63 lower-case letters, digits, - or _, starting with a letter or digit',
        'allowedGpuTypes must be an array',
        'minNetworkMbps must not be less than 0',
        'minReputation must not be greater than 1',
        'property color should not exist',
      ]),
    );
    const missingName = await call('POST', '/api/v1/pools', ADMIN, {});
    expect(missingName.status).toBe(400);
    expect(missingName.body.message.join(' ')).toMatch(/^name must be/);
    const badPatch = await call('PATCH', '/api/v1/pools/default', ADMIN, { minNetworkMbps: 'fast' });
    expect(badPatch.status).toBe(400);
    expect(badPatch.body.message).toContain('minNetworkMbps must be an integer number');
  });

  it('deletes a pool nothing uses, and says what still uses one with a 409', async () => {
    expect((await call('POST', '/api/v1/pools', ADMIN, { name: 'doomed' })).status).toBe(201);
    // A machine invited to the pool (a pending join), and a deployment placed there.
    const invited = await call('POST', '/api/v1/machines', ADMIN, { pool: 'doomed' });
    expect(invited.status).toBe(201);
    const bundle = Buffer.from('pool test code');
    const digest = `sha256:${createHash('sha256').update(bundle).digest('hex')}`;
    const put = await fetch(`${base}/api/v1/code/${digest}`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/gzip' },
      body: bundle,
    });
    expect(put.status).toBe(201);
    const spec = { name: 'pinned', kind: 'endpoint', handler: 'app.py:f', code: digest, pool: 'doomed' };
    expect((await call('POST', '/api/v1/deployments', ADMIN, spec)).status).toBe(201);

    expect((await call('DELETE', '/api/v1/pools/doomed', member)).status).toBe(403);
    const held = await call('DELETE', '/api/v1/pools/doomed', ADMIN);
    expect(held.status).toBe(409);
    expect(held.body.message).toMatch(/^pool "doomed" is still used by 1 machine\(s\) .*; deployment\(s\) pinned \(/);

    expect((await call('DELETE', `/api/v1/machines/${invited.body.machineId}`, ADMIN)).status).toBeLessThan(300);
    expect((await call('DELETE', '/api/v1/deployments/pinned', ADMIN)).status).toBeLessThan(300);
    const gone = await tern(['pool', 'delete', 'doomed'], base, ADMIN);
    expect(gone.stderr).toBe('');
    expect(gone.stdout).toBe('Pool doomed deleted.\n');
    expect((await call('GET', '/api/v1/pools/doomed', member)).status).toBe(404);
    expect((await call('DELETE', '/api/v1/pools/doomed', ADMIN)).status).toBe(404);

    const fallback = await call('DELETE', '/api/v1/pools/default', ADMIN);
    expect(fallback.status).toBe(409);
    expect(fallback.body.message).toMatch(/where agents join when they name no pool/);
  });

  it('creates and lists pools from the CLI', async () => {
    const created = await tern(['pool', 'create', 'cpu-only', '--min-network-mbps', '100', '--min-reputation', '0.5'], base, ADMIN);
    expect(created.stderr).toBe('');
    expect(created.code).toBe(0);
    expect(created.stdout).toMatch(/^Pool cpu-only created\./);

    const gpu = await tern(['pool', 'create', 'a100', '--gpu-types', 'A100, H100'], base, ADMIN);
    expect(gpu.code).toBe(0);
    expect((await call('GET', '/api/v1/pools/a100', member)).body.allowedGpuTypes).toEqual(['A100', 'H100']);

    const list = await tern(['pool', 'list'], base, member);
    expect(list.code).toBe(0);
    const lines = list.stdout.trim().split('\n');
    expect(lines[0]).toMatch(/^NAME\s+GPU TYPES\s+MIN NETWORK\s+MIN REPUTATION\s+MACHINES$/);
    expect(lines).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^cpu-only\s+any\s+100 Mbps\s+0\.5\s+0 ready \/ 0$/),
        expect.stringMatching(/^a100\s+A100,H100\s+-\s+-\s+0 ready \/ 0$/),
        expect.stringMatching(/^default\s+any\s+-\s+-\s+0 ready \/ 0$/),
      ]),
    );

    const bad = await tern(['pool', 'create', 'x', '--min-network-mbps', 'lots'], base, ADMIN);
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toMatch(/must be a whole number/);
    const denied = await tern(['pool', 'create', 'y'], base, member);
    expect(denied.code).toBe(1);
    expect(denied.stderr).toBe('tern: 403 this action needs an operator token\n');
  });
});
