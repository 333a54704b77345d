import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Kvm } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/transport-node';
import { createTestSchema, type TestSchema, testEnv, uniqueName } from '../support/isolation.js';
import { connectTestNats, deleteNamespaces } from '../support/nats.js';
import { freePort, ServiceProcess } from '../support/processes.js';
import { ADMIN, client, registration, tern } from '../machines/harness.js';

const BUNDLE = Buffer.from('the bundle every spec here names');
const CODE = `sha256:${createHash('sha256').update(BUNDLE).digest('hex')}`;
const spec = (extra: Record<string, unknown> = {}) => ({
  name: 'hello',
  kind: 'endpoint',
  handler: 'app.py:predict',
  code: CODE,
  ...extra,
});

describe('deployments API, code upload and CLI', () => {
  let schema: TestSchema;
  let namespace: string;
  let gateway: ServiceProcess;
  let base: string;
  let call: ReturnType<typeof client>;
  let nc: NatsConnection;

  beforeAll(async () => {
    schema = await createTestSchema('deployments');
    namespace = uniqueName('deployments');
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    call = client(base);
    gateway = new ServiceProcess('gateway', testEnv(schema, namespace, { HTTP_PORT: String(port), BOOTSTRAP_ADMIN_TOKEN: ADMIN })).start();
    await gateway.ready();
    nc = await connectTestNats();
    await call('POST', '/api/v1/pools', ADMIN, { name: 'h100', allowedGpuTypes: ['H100'] });
    expect((await upload(CODE, BUNDLE, ADMIN)).status).toBe(201);
  });

  const upload = (digest: string, body: Buffer, token: string) =>
    fetch(`${base}/api/v1/code/${digest}`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/gzip' },
      body,
    });
  const head = (digest: string, token: string) =>
    fetch(`${base}/api/v1/code/${digest}`, { method: 'HEAD', headers: { authorization: `Bearer ${token}` } });

  afterAll(async () => {
    await nc?.close();
    await gateway?.stop();
    await schema?.drop();
    await deleteNamespaces(namespace);
  });

  async function records(): Promise<Record<string, any>> {
    const kv = await new Kvm(nc).open(`${namespace}_deployments`);
    const out: Record<string, any> = {};
    for await (const key of await kv.keys()) out[key] = (await kv.get(key))?.json();
    return out;
  }

  it('names each broken field and rule', async () => {
    const cases: [Record<string, unknown>, RegExp][] = [
      [{ name: undefined }, /^name must be 1-63 lower-case/],
      [{ handler: 'app.py' }, /^handler must look like app.py:predict/],
      [{ command: ['python3', 'serve.py'] }, /^command cannot be given together with handler/],
      [
        { autoscaler: { type: 'queue_depth', min_containers: 3, max_containers: 2 } },
        /^autoscaler.min_containers must not exceed max_containers \(2\)/,
      ],
      [{ memory: 'lots' }, /^memory must be a size like 512Mi/],
      [{ colour: 'red' }, /^property colour should not exist/],
    ];
    for (const [extra, message] of cases) {
      const res = await call('POST', '/api/v1/deployments', ADMIN, spec(extra));
      expect(res.status).toBe(400);
      expect(res.body.message).toEqual(expect.arrayContaining([expect.stringMatching(message)]));
    }
  });

  it('refuses pools and GPUs that could never run it, accepts a type a pool allows', async () => {
    const pool = await call('POST', '/api/v1/deployments', ADMIN, spec({ name: 'nopool', pool: 'nowhere' }));
    expect(pool.status).toBe(400);
    expect(pool.body.message).toEqual(['pool "nowhere" does not exist (pools: default, h100)']);

    const gpu = await call('POST', '/api/v1/deployments', ADMIN, spec({ name: 'nogpu', gpu: 'B200' }));
    expect(gpu.status).toBe(400);
    expect(gpu.body.message[0]).toMatch(/^no pool offers gpu B200: pools list H100/);

    const ok = await call('POST', '/api/v1/deployments', ADMIN, spec({ name: 'gpu', gpu: ['B200', 'H100'] }));
    expect(ok.status).toBe(201);

    // A registered machine with two H100s sets the most one machine can give.
    const made = await call('POST', '/api/v1/machines', ADMIN, { pool: 'h100' });
    expect(
      (
        await call(
          'POST',
          '/api/v1/machine/register',
          made.body.joinToken,
          registration('h100', { gpuModels: ['NVIDIA H100 80GB HBM3', 'NVIDIA H100 80GB HBM3'] }),
        )
      ).status,
    ).toBe(200);
    const many = await call('POST', '/api/v1/deployments', ADMIN, spec({ name: 'gpu', gpu: 'H100', gpu_count: 4 }));
    expect(many.status).toBe(400);
    expect(many.body.message).toEqual(['gpu_count 4 is more than any machine has: the most on one machine is 2']);
  });

  it('versions each deploy and mirrors them into the deployments bucket', async () => {
    const first = await call('POST', '/api/v1/deployments', ADMIN, spec());
    expect(first.status).toBe(201);
    expect(first.body).toMatchObject({
      name: 'hello',
      version: 1,
      url: `${base}/endpoint/hello`,
      spec: { image: 'host', pool: 'default' },
    });
    const second = await call('POST', '/api/v1/deployments', ADMIN, spec({ workers: 2 }));
    expect(second.body).toMatchObject({ version: 2, deploymentId: first.body.deploymentId, spec: { workers: 2 } });

    const kv = await records();
    const id = first.body.deploymentId;
    expect(kv[`${id}.1`]).toMatchObject({ name: 'hello', version: 1, latest: false, state: 'active', spec: { workers: 1 } });
    expect(kv[`${id}.2`]).toMatchObject({ name: 'hello', version: 2, latest: true, state: 'active', spec: { workers: 2 } });
  });

  it('lists, shows, stops, starts and deletes; unknown names are 404', async () => {
    const list = await call('GET', '/api/v1/deployments', ADMIN);
    expect(list.body).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ name: 'hello', kind: 'endpoint', version: 2, state: 'ready', desired: 0, actual: 0 }),
      ]),
    );
    const one = await call('GET', '/api/v1/deployments/hello', ADMIN);
    expect(one.body.versions.map((v: any) => [v.version, v.latest])).toEqual([
      [2, true],
      [1, false],
    ]);
    expect(one.body.submitted).toMatchObject({ workers: 2 });

    expect((await call('POST', '/api/v1/deployments/hello/stop', ADMIN)).body.state).toBe('stopped');
    const id = one.body.deploymentId;
    expect((await records())[`${id}.2`].state).toBe('stopped');
    expect((await call('POST', '/api/v1/deployments/hello/start', ADMIN)).body.state).toBe('ready');
    expect((await records())[`${id}.2`].state).toBe('active');

    expect((await call('DELETE', '/api/v1/deployments/hello', ADMIN)).status).toBe(200);
    expect(Object.keys(await records()).filter((k) => k.startsWith(id))).toEqual([]);
    const gone = await call('GET', '/api/v1/deployments/hello', ADMIN);
    expect(gone.status).toBe(404);
    expect(gone.body.message).toBe('deployment "hello" not found in workspace "default"');
    expect((await call('POST', '/api/v1/deployments/nothing/stop', ADMIN)).status).toBe(404);

    // Deploying the name again continues its versions.
    expect((await call('POST', '/api/v1/deployments', ADMIN, spec())).body.version).toBe(3);
  });

  it('stores code under its digest, refusing a mismatch', async () => {
    const bundle = Buffer.from('not really a tarball');
    const digest = `sha256:${createHash('sha256').update(bundle).digest('hex')}`;
    const put = (d: string, body: Buffer) => upload(d, body, ADMIN);

    expect((await head(digest, ADMIN)).status).toBe(404);
    const wrong = await put(`sha256:${'b'.repeat(64)}`, bundle);
    expect(wrong.status).toBe(400);
    expect(((await wrong.json()) as { message: string[] }).message[0]).toMatch(/^digest does not match the body/);
    expect((await put(digest, bundle)).status).toBe(201);
    expect((await put(digest, bundle)).status).toBe(200);
    expect((await head(digest, ADMIN)).status).toBe(200);
    expect((await put('md5:abc', bundle)).status).toBe(400);
  });

  it("keeps code bundles to the workspace that uploaded them: another workspace's digest is 404 until it uploads the bytes", async () => {
    const other = (await call('POST', '/api/v1/workspaces', ADMIN, { name: 'code-b' })).body.token as string;
    expect((await head(CODE, other)).status).toBe(404);
    const deploy = await call('POST', '/api/v1/deployments', other, spec({ name: 'borrowed' }));
    expect(deploy.status).toBe(404);
    expect(deploy.body.message).toBe(
      `code ${CODE} not found in workspace "code-b": upload it first (PUT /api/v1/code/<digest>; tern deploy does)`,
    );
    expect((await call('GET', '/api/v1/deployments/borrowed', other)).status).toBe(404);
    const missing = `sha256:${'c'.repeat(64)}`;
    expect((await call('POST', '/api/v1/deployments', ADMIN, spec({ name: 'nothing-uploaded', code: missing }))).status).toBe(404);

    // The same bytes from the second workspace: its own claim (201), the bytes stored once.
    expect((await upload(CODE, BUNDLE, other)).status).toBe(201);
    expect((await head(CODE, other)).status).toBe(200);
    expect((await call('POST', '/api/v1/deployments', other, spec({ name: 'borrowed' }))).status).toBe(201);
  });

  it('deploys an example with the CLI, uploading its folder', async () => {
    const out = await tern(['deploy', 'examples/hello-python/tern.yaml'], base, ADMIN);
    expect(out.stderr).toBe('');
    expect(out.stdout).toMatch(/Uploading code/);
    expect(out.stdout).toContain(`Deployed hello version 4: ${base}/endpoint/hello (this version: ${base}/endpoint/hello@4)`);
    expect(out.stdout).toContain('scales from zero on the first request');
    const again = await tern(['deploy', 'examples/hello-python/tern.yaml', '--no-wait'], base, ADMIN);
    expect(again.stdout).toMatch(/already uploaded/);

    const listed = await tern(['deployments'], base, ADMIN);
    expect(listed.stdout).toMatch(/^NAME +KIND +VERSION +STATE +DESIRED +ACTUAL +REASON/);
    expect(listed.stdout).toMatch(/hello +endpoint +5 +ready +0 +0/);
    expect((await tern(['deployment', 'stop', 'hello'], base, ADMIN)).stdout).toBe('hello stopped.\n');
  });

  it('names the file and line of a YAML error, and prints the gateway messages', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tern-spec-'));
    writeFileSync(join(dir, 'bad.yaml'), 'name: x\nkind: endpoint\nhandler: app.py:predict\nworkers: : 2\n');
    const bad = await tern(['deploy', join(dir, 'bad.yaml')], base, ADMIN);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(new RegExp(`${join(dir, 'bad.yaml')}:4:10: invalid YAML`));

    writeFileSync(join(dir, 'tern.yaml'), 'name: x\nkind: endpoint\nhandler: app.py\n');
    const invalid = await tern(['deploy', join(dir, 'tern.yaml')], base, ADMIN);
    expect(invalid.code).toBe(1);
    expect(invalid.stderr).toMatch(/^tern: 400 handler must look like app.py:predict/);
    rmSync(dir, { recursive: true, force: true });
  });
  it('rewrites the bucket from Postgres when the gateway starts', async () => {
    const kv = await new Kvm(nc).open(`${namespace}_deployments`);
    const before = await records();
    const [key] = Object.keys(before);
    await kv.delete(key);
    await kv.put('stale.1', JSON.stringify({ name: 'ghost' }));
    await gateway.stop();
    gateway = new ServiceProcess('gateway', gateway.env).start();
    await gateway.ready();
    expect(await records()).toEqual(before);
  });
});
