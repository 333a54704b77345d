import { runningGateway } from '../support/gateway.js';
import { createHash, randomBytes } from 'node:crypto';
import pg from 'pg';
import { newUserKey } from '#tern/nats-auth';
import { registration } from '../machines/harness.js';

/**
 * The cross-workspace access matrix. Every route of the OpenAPI document must have an entry in
 * ROUTES (a new route without one fails the test); each is called with workspace B's admin and
 * member tokens against workspace A's objects, and the operator routes with workspace tokens.
 */
const OPERATOR = `tern_${'o'.repeat(43)}`;

/**
 * - operator: a platform action; every workspace token gets 403 "this action needs an operator token".
 * - workspace: acts on the caller's workspace; B against A's object gets 404 or 403, never A's data.
 * - machine: the agent's routes; an API token of a workspace is refused (401 or 403).
 * - shared: platform facts every token may read (pools); never a workspace's data.
 * - public: no token needed, no workspace data (health).
 */
type Access = 'operator' | 'workspace' | 'shared' | 'machine' | 'public';

interface Route {
  access: Access;
  /** A body for the call: B's attempt on A's objects (or a valid body for the operator). */
  body?: (a: Objects) => unknown;
  /** Statuses B may get on A's objects other than 403 and 404, with why. */
  also?: number[];
  /** Query string added to the path. */
  query?: (a: Objects) => string;
}

interface Objects {
  workspaceId: string;
  deployment: string;
  deploymentId: string;
  queue: string;
  taskId: string;
  tokenId: string;
  machineId: string;
  digest: string;
  natsUserId: string;
  volume: string;
  sandbox: string;
  secret: string;
}

const spec = (a: Objects, name: string, kind = 'endpoint') => ({ name, kind, handler: 'app.py:predict', code: a.digest });

const ROUTES: Record<string, Route> = {
  'GET /health/ready': { access: 'public' },
  'GET /health/live': { access: 'public' },
  'GET /health/self': { access: 'public' },
  'POST /api/v1/machine/register': {
    access: 'machine',
    body: (a) => registration('default', { machineId: a.machineId }),
  },
  'POST /api/v1/machine/keepalive': { access: 'machine', body: (a) => ({ machineId: a.machineId, poolName: 'default' }) },
  'POST /api/v1/machine/rotate-token': { access: 'machine' },
  'GET /api/v1/machine/network-test': { access: 'machine' },
  'POST /api/v1/machine/network-test': { access: 'machine' },
  'GET /api/v1/agent/code/{digest}': { access: 'machine' },
  'GET /api/v1/agent/bodies/{requestId}': { access: 'machine' },
  'PUT /api/v1/agent/tasks/{taskId}/attempts/{attempt}/result': { access: 'machine' },
  'GET /api/v1/agent/task-permits/{deploymentId}/versions/{version}': { access: 'machine' },
  'GET /api/v1/agent/containers/{containerId}/volumes/{name}/manifest': { access: 'machine' },
  'GET /api/v1/agent/containers/{containerId}/volumes/{name}/grant': { access: 'machine' },
  'GET /api/v1/agent/containers/{containerId}/secrets': { access: 'machine' },
  'GET /api/v1/agent/containers/{containerId}/volumes/{name}/chunks/{hex}': { access: 'machine' },
  'PUT /api/v1/agent/containers/{containerId}/volumes/{name}/chunks/{hex}': { access: 'machine' },
  'POST /api/v1/agent/containers/{containerId}/volumes/{name}/commit': { access: 'machine' },

  'GET /api/v1/workspaces': { access: 'operator' },
  'POST /api/v1/workspaces': { access: 'operator', body: () => ({ name: `by-operator-${Date.now()}` }) },
  // Here with A's id for B (403); the operator's call names no workspace (400). Its effects: test/gateway/workspace-deletes.test.ts.
  'DELETE /api/v1/workspaces/{id}': { access: 'operator' },
  'POST /api/v1/pools': { access: 'operator', body: () => ({ name: `pool-${Date.now()}` }) },
  'PATCH /api/v1/pools/{name}': { access: 'operator', body: () => ({}) },
  'DELETE /api/v1/pools/{name}': { access: 'operator' },
  'POST /api/v1/machines': { access: 'operator', body: () => ({ pool: 'default' }) },
  'DELETE /api/v1/machines/{id}': { access: 'operator' },
  'POST /api/v1/machines/{id}/revoke': { access: 'operator' },
  'POST /api/v1/machines/{id}/rotate-token': { access: 'operator' },
  'GET /api/v1/usage/rewards': { access: 'operator' },

  'GET /api/v1/workspace': { access: 'workspace' },
  'GET /api/v1/tokens': { access: 'workspace' },
  // B creates a token in its own workspace (a member is refused); never in A's.
  'POST /api/v1/tokens': { access: 'workspace', body: () => ({ name: 'b-token' }), also: [201] },
  'DELETE /api/v1/tokens/{id}': { access: 'workspace' },
  // An integrator's NATS user for A: B's admin is refused another workspace, B's member any.
  'POST /api/v1/nats/users': {
    access: 'workspace',
    body: (a) => ({ name: 'b-bridge', workspace: a.workspaceId, allow: ['events', 'submit'], publicKey: newUserKey().publicKey }),
  },
  'GET /api/v1/nats/users': { access: 'workspace', query: (a) => `workspace=${a.workspaceId}` },
  'DELETE /api/v1/nats/users/{id}': { access: 'workspace' },
  'GET /api/v1/pools': { access: 'shared' },
  'GET /api/v1/pools/{name}': { access: 'shared' },
  'GET /api/v1/machines': { access: 'workspace' },
  'GET /api/v1/machines/{id}': { access: 'workspace' },
  'GET /api/v1/machines/{id}/reputation': { access: 'workspace' },
  'GET /api/v1/machines/{id}/state-changes': { access: 'workspace' },
  'GET /api/v1/usage': { access: 'workspace', query: (a) => `workspace=${a.workspaceId}` },
  'HEAD /api/v1/code/{digest}': { access: 'workspace' },
  // B sends other bytes under A's digest: refused as a mismatch, A's bundle untouched.
  'PUT /api/v1/code/{digest}': { access: 'workspace', also: [400, 415] },
  // This gateway has no registry: refused before anything is read. The folder's own check (B naming A's upload: 404) is in test/images/image-builds-api.test.ts.
  'POST /api/v1/images/builds': {
    access: 'workspace',
    body: (a) => ({ image: { pip: ['x==1'], pip_wheels: 'wheels' }, code: a.digest }),
    also: [503],
  },
  // A's build by B's admin: 404 whether or not it exists (this gateway has no registry); B's member: 403.
  'DELETE /api/v1/images': { access: 'workspace', query: (a) => `ref=127.0.0.1:5000/builds/${a.workspaceId}/app:1` },
  'POST /api/v1/deployments': { access: 'workspace', body: (a) => spec(a, a.deployment) },
  'GET /api/v1/deployments': { access: 'workspace' },
  'GET /api/v1/deployments/{name}': { access: 'workspace' },
  'POST /api/v1/deployments/{name}/stop': { access: 'workspace' },
  'POST /api/v1/deployments/{name}/start': { access: 'workspace' },
  'DELETE /api/v1/deployments/{name}': { access: 'workspace' },
  'GET /api/v1/deployments/{name}/logs': { access: 'workspace' },
  'POST /api/v1/deployments/{name}/socket-tickets': { access: 'workspace' },
  'GET /api/v1/tasks': { access: 'workspace' },
  // Service states without hosts or agents for a workspace token (checked for A's secrets like every listing).
  'GET /api/v1/system': { access: 'workspace' },
  'GET /api/v1/tasks/stats': { access: 'workspace', query: (a) => `deployment=${a.queue}` },
  'GET /api/v1/deployments/{name}/scale-events': { access: 'workspace' },
  'GET /api/v1/deployments/{name}/requests': { access: 'workspace' },
  'GET /api/v1/tasks/{id}': { access: 'workspace' },
  'GET /api/v1/tasks/{id}/wait': { access: 'workspace' },
  'DELETE /api/v1/tasks/{id}': { access: 'workspace' },
  // B creates a volume of its own (never in A's workspace); A's by name is 404 to B everywhere.
  'POST /api/v1/volumes': { access: 'workspace', body: () => ({ name: `b-volume-${Date.now()}` }), also: [201] },
  'GET /api/v1/volumes': { access: 'workspace' },
  'GET /api/v1/volumes/{name}': { access: 'workspace' },
  'DELETE /api/v1/volumes/{name}': { access: 'workspace' },
  'GET /api/v1/volumes/{name}/ls': { access: 'workspace' },
  'PUT /api/v1/volumes/{name}/files': { access: 'workspace', query: () => 'path=weights.bin' },
  'GET /api/v1/volumes/{name}/files': { access: 'workspace', query: () => 'path=weights.bin' },
  'DELETE /api/v1/volumes/{name}/files': { access: 'workspace', query: () => 'path=weights.bin' },
  'POST /api/v1/volumes/{name}/commit': { access: 'workspace' },
  // B's bytes are no secret value (415); a name of B's own would be B's secret, never A's.
  'PUT /api/v1/secrets/{name}': { access: 'workspace', also: [415] },
  'DELETE /api/v1/secrets/{name}': { access: 'workspace' },
  'GET /api/v1/secrets': { access: 'workspace' },
  // The registry's token service grants only the caller's own rights (test/e2e/registry-auth.test.ts);
  // this gateway signs none (no REGISTRY_TOKEN_KEY_FILE), so B gets its 404.
  'GET /api/v1/registry/token': {
    access: 'workspace',
    query: (a) => `service=tern-registry&scope=repository:builds/${a.workspaceId}/x:pull`,
  },
  'POST /taskqueue/{name}': { access: 'workspace', body: () => ({ x: 1 }) },
  'POST /taskqueue/{name}/{version}': { access: 'workspace', body: () => ({ x: 1 }) },
  'POST /function/{name}': { access: 'workspace', body: () => ({ x: 1 }) },
  'POST /function/{name}/{version}': { access: 'workspace', body: () => ({ x: 1 }) },
  'POST /function/{name}/map': { access: 'workspace', body: () => [{ x: 1 }] },
  'POST /function/{name}/{version}/map': { access: 'workspace', body: () => [{ x: 1 }] },
  'GET /api/v1/calls/{id}': { access: 'workspace' },
  'GET /api/v1/calls/{id}/wait': { access: 'workspace' },
  'GET /api/v1/maps/{id}': { access: 'workspace' },
  'GET /api/v1/maps/{id}/results': { access: 'workspace' },
  'DELETE /api/v1/maps/{id}': { access: 'workspace' },
  'GET /api/v1/schedules': { access: 'workspace' },
  // B creates a sandbox of its own (no machine here: 503); A's by id is 404 to B everywhere.
  'POST /api/v1/sandboxes': { access: 'workspace', body: () => ({ cpu: 0.1 }), also: [503] },
  'GET /api/v1/sandboxes': { access: 'workspace' },
  'GET /api/v1/sandboxes/{id}': { access: 'workspace' },
  'DELETE /api/v1/sandboxes/{id}': { access: 'workspace' },
  'POST /api/v1/sandboxes/{id}/ports': { access: 'workspace', body: () => ({ port: 8080 }) },
  'POST /api/v1/sandboxes/{id}/keepalive': { access: 'workspace' },
  'POST /api/v1/sandboxes/{id}/snapshot': { access: 'workspace', body: () => ({ name: 'stolen' }) },
  'POST /api/v1/sandboxes/{id}/exec': { access: 'workspace', body: () => ({ cmd: ['cat', '/workspace/secret'] }) },
  'GET /api/v1/sandboxes/{id}/processes': { access: 'workspace' },
  'GET /api/v1/sandboxes/{id}/processes/{pid}': { access: 'workspace' },
  'DELETE /api/v1/sandboxes/{id}/processes/{pid}': { access: 'workspace' },
  'POST /api/v1/sandboxes/{id}/processes/{pid}/stdin': { access: 'workspace', body: () => ({ data: 'x' }) },
  'GET /api/v1/sandboxes/{id}/files': { access: 'workspace', query: () => 'path=secret' },
  'PUT /api/v1/sandboxes/{id}/files': { access: 'workspace', query: () => 'path=secret' },
  'DELETE /api/v1/sandboxes/{id}/files': { access: 'workspace', query: () => 'path=secret' },
  'GET /api/v1/sandboxes/{id}/files/list': { access: 'workspace', query: () => 'path=.' },
  'GET /api/v1/sandboxes/{id}/files/stat': { access: 'workspace', query: () => 'path=secret' },
  'POST /api/v1/sandboxes/{id}/files/mkdir': { access: 'workspace', query: () => 'path=dir' },
  'GET /api/v1/sandboxes/{id}/shell': { access: 'workspace' },
};
/** Every method @All answers, as the OpenAPI document lists them. */
for (const method of ['GET', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS', 'HEAD', 'SEARCH']) {
  // SEARCH is in the document (from @All) but the HTTP server answers it 405 before any route.
  const also = method === 'SEARCH' ? [405] : [];
  ROUTES[`${method} /endpoint/{name}`] = { access: 'workspace', also };
  ROUTES[`${method} /endpoint/{name}/{path}`] = { access: 'workspace', also };
  // The sandbox port route reads any body raw and refuses a SEARCH's before looking the sandbox up.
  const sandboxAlso = method === 'SEARCH' ? [400, 405] : [];
  ROUTES[`${method} /sandbox/{id}/{port}`] = { access: 'workspace', also: sandboxAlso };
  ROUTES[`${method} /sandbox/{id}/{port}/{path}`] = { access: 'workspace', also: sandboxAlso };
  // A public port's URL is its own credential (sandboxes.test.ts: an unknown token is 404).
  ROUTES[`${method} /sandbox-public/{token}`] = { access: 'public' };
  ROUTES[`${method} /sandbox-public/{token}/{path}`] = { access: 'public' };
}

/** A path of the document with A's objects in it. */
function fill(path: string, a: Objects): string {
  const value = (param: string): string => {
    if (param === 'digest') return a.digest;
    if (param === 'version') return 'v1';
    if (param === 'path') return 'predict';
    if (param === 'requestId') return 'req-of-a';
    if (param === 'attempt') return '1';
    if (param === 'deploymentId') return a.deploymentId;
    if (param === 'containerId') return 'c-a';
    if (param === 'hex') return 'a'.repeat(64);
    if (param === 'port') return '8080';
    if (param === 'pid') return '1';
    if (path.startsWith('/api/v1/sandboxes/') || path.startsWith('/sandbox/')) return a.sandbox;
    if (path.startsWith('/api/v1/volumes/') || path.startsWith('/api/v1/agent/containers/')) return a.volume;
    if (path.startsWith('/api/v1/secrets/')) return a.secret;
    if (path.startsWith('/api/v1/deployments/') || path.startsWith('/endpoint/')) return a.deployment;
    if (path.startsWith('/taskqueue/') || path.startsWith('/function/')) return a.queue;
    if (path.startsWith('/api/v1/calls/') || path.startsWith('/api/v1/maps/')) return a.taskId;
    if (path.startsWith('/api/v1/tasks/') || path.startsWith('/api/v1/agent/tasks/')) return a.taskId;
    if (path.startsWith('/api/v1/tokens/')) return a.tokenId;
    if (path.startsWith('/api/v1/nats/users/')) return a.natsUserId;
    if (path.startsWith('/api/v1/machines/')) return a.machineId;
    if (path.startsWith('/api/v1/pools/')) return 'default';
    if (path.startsWith('/api/v1/workspaces/')) return a.workspaceId;
    throw new Error(`no value for {${param}} in ${path}`);
  };
  return path.replace(/\{(\w+)\}/g, (_, param: string) => value(param));
}

describe('tenancy: workspace B never reaches workspace A, workspace tokens never act as the operator', () => {
  const gateway = runningGateway('tenancy', OPERATOR, { SECRETS_KEY: randomBytes(32).toString('base64') });
  let base: string;
  let db: pg.Client;
  let a: Objects;
  const tokens: Record<'aAdmin' | 'aMember' | 'bAdmin' | 'bMember', string> = { aAdmin: '', aMember: '', bAdmin: '', bMember: '' };
  let routes: [string, string][];

  const call = async (method: string, path: string, token?: string, body?: unknown, contentType = 'application/json') => {
    const res = await fetch(`${base}${path}`, {
      method,
      headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), ...(body !== undefined ? { 'content-type': contentType } : {}) },
      body: body === undefined ? undefined : Buffer.isBuffer(body) ? body : JSON.stringify(body),
      signal: AbortSignal.timeout(10_000),
    });
    const text = method === 'HEAD' ? '' : await res.text();
    let parsed: any = text;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      // Not JSON: an SSE stream or plain text; kept as text.
    }
    return { status: res.status, text, body: parsed };
  };

  beforeAll(async () => {
    base = gateway.base;
    db = new pg.Client({ connectionString: gateway.schema.url, options: `-c search_path=${gateway.schema.schema}` });
    await db.connect();

    const made = async (name: string) => {
      const w = (await call('POST', '/api/v1/workspaces', OPERATOR, { name })).body;
      const member = (await call('POST', '/api/v1/tokens', w.token, { name: 'member' })).body;
      return {
        workspaceId: w.workspace.id as string,
        admin: w.token as string,
        member: member.token as string,
        memberId: member.id as string,
      };
    };
    const wa = await made('tenant-a');
    const wb = await made('tenant-b');
    Object.assign(tokens, { aAdmin: wa.admin, aMember: wa.member, bAdmin: wb.admin, bMember: wb.member });

    const bundle = Buffer.from('tenant a code');
    const digest = `sha256:${createHash('sha256').update(bundle).digest('hex')}`;
    expect((await call('PUT', `/api/v1/code/${digest}`, wa.admin, bundle, 'application/gzip')).status).toBe(201);
    const deployed = await call('POST', '/api/v1/deployments', wa.admin, {
      name: 'a-secret-app',
      kind: 'endpoint',
      handler: 'app.py:f',
      code: digest,
    });
    expect(deployed.status).toBe(201);
    const queue = await call('POST', '/api/v1/deployments', wa.admin, {
      name: 'a-secret-queue',
      kind: 'task_queue',
      handler: 'app.py:f',
      code: digest,
    });
    expect(queue.status).toBe(201);
    const task = await call('POST', '/taskqueue/a-secret-queue', wa.admin, { x: 1 });
    expect(task.status).toBe(202);

    // A machine A's work ran on.
    await db.query(`INSERT INTO machines (id, pool, state, network) VALUES ('a-box', 'default', 'ready', $1)`, [
      JSON.stringify({ interfaces: [{ name: 'eth0', addresses: ['10.1.2.3'], mac: '02:42:ac:11:00:02' }] }),
    ]);
    const [version] = (await db.query(`SELECT id FROM deployment_versions WHERE deployment_id = $1`, [deployed.body.deploymentId])).rows;
    await db.query(
      `INSERT INTO containers (id, deployment_version_id, machine_id, state, requested) VALUES ('c-a', $1, 'a-box', 'running', '{}')`,
      [version.id],
    );

    // A running sandbox of A's (its machine is a-box).
    await db.query(
      `INSERT INTO sandboxes (id, workspace_id, machine_id, pool, state, spec, requested, timeout_seconds, started_at)
       VALUES ('sb-a-secret', $1, 'a-box', 'default', 'running', '{}', '{}', 300, now())`,
      [wa.workspaceId],
    );

    // A volume of A's with a file in it.
    expect((await call('POST', '/api/v1/volumes', wa.admin, { name: 'a-secret-volume' })).status).toBe(201);
    const file = await call(
      'PUT',
      '/api/v1/volumes/a-secret-volume/files?path=weights.bin',
      wa.admin,
      Buffer.from('a weights'),
      'application/octet-stream',
    );
    expect(file.status).toBe(200);

    a = {
      workspaceId: wa.workspaceId,
      deployment: 'a-secret-app',
      deploymentId: deployed.body.deploymentId,
      queue: 'a-secret-queue',
      taskId: task.body.task_id,
      tokenId: wa.memberId,
      machineId: 'a-box',
      digest,
      natsUserId: (
        await call('POST', '/api/v1/nats/users', wa.admin, { name: 'a-bridge', allow: ['events'], publicKey: newUserKey().publicKey })
      ).body.id,
      volume: 'a-secret-volume',
      sandbox: 'sb-a-secret',
      secret: 'a_secret_registry',
    };
    expect((await call('PUT', `/api/v1/secrets/${a.secret}`, wa.admin, { value: 'robot:a-password' })).status).toBe(200);

    const doc = (await call('GET', '/docs-json', OPERATOR)).body as { paths: Record<string, Record<string, unknown>> };
    routes = Object.entries(doc.paths).flatMap(([path, methods]) =>
      Object.keys(methods).map((m): [string, string] => [m.toUpperCase(), path]),
    );
  });

  afterAll(async () => {
    await db?.end();
  });

  /** A's identifiers that must never appear in an answer to B. */
  const secrets = () => [
    a.workspaceId,
    a.deployment,
    a.deploymentId,
    a.queue,
    a.taskId,
    a.tokenId,
    a.machineId,
    a.natsUserId,
    a.volume,
    a.sandbox,
    a.secret,
    'a-password',
    'tenant-a',
    '10.1.2.3',
  ];

  it('has an expectation for every route of the OpenAPI document', () => {
    expect(routes.length).toBeGreaterThan(30);
    const missing = routes.map(([m, p]) => `${m} ${p}`).filter((key) => !ROUTES[key]);
    expect(missing).toEqual([]);
  });

  it("B's admin and member tokens against A's objects: 404 or 403, never A's data", async () => {
    const failures: string[] = [];
    for (const [method, path] of routes) {
      const route = ROUTES[`${method} ${path}`];
      if (!route || route.access === 'public') continue;
      const url = fill(path, a) + (route.query ? `?${route.query(a)}` : '');
      for (const who of ['bAdmin', 'bMember'] as const) {
        const body = method === 'PUT' ? Buffer.from('tenant b bytes') : route.body?.(a);
        const res = await call(method, url, tokens[who], body, method === 'PUT' ? 'application/gzip' : 'application/json');
        const listing =
          (route.access === 'workspace' && !path.includes('{') && method === 'GET' && !route.query) || route.access === 'shared';
        const allowed = listing
          ? [200]
          : route.access === 'machine'
            ? [401, 403]
            : route.access === 'operator'
              ? [403]
              : [403, 404, ...(route.also ?? [])];
        if (!allowed.includes(res.status)) failures.push(`${who} ${method} ${url}: ${res.status} (expected ${allowed.join('/')})`);
        // A 404 may repeat what B asked for; anything else of A's is a leak.
        const asked = url + JSON.stringify(body ?? '');
        const leaked = secrets().filter((s) => res.text.includes(s) && !asked.includes(s));
        if (leaked.length) failures.push(`${who} ${method} ${url}: the answer contains ${leaked.join(', ')}`);
        if (route.access === 'operator' && res.body?.message !== 'this action needs an operator token') {
          failures.push(`${who} ${method} ${url}: message ${JSON.stringify(res.body?.message)}`);
        }
      }
    }
    expect(failures).toEqual([]);
    // A's objects are as they were.
    expect((await call('GET', `/api/v1/deployments/${a.deployment}`, tokens.aMember)).body.state).not.toBe('deleted');
    expect((await call('GET', `/api/v1/tasks/${a.taskId}`, tokens.aMember)).status).toBe(200);
    expect((await call('GET', '/api/v1/tokens', tokens.aAdmin)).body.map((t: { id: string }) => t.id)).toContain(a.tokenId);
    expect((await call('HEAD', `/api/v1/code/${a.digest}`, tokens.aMember)).status).toBe(200);
    const weights = await call('GET', `/api/v1/volumes/${a.volume}/files?path=weights.bin`, tokens.aMember);
    expect(weights.text).toBe('a weights');
    expect((await call('GET', '/api/v1/secrets', tokens.aMember)).text).toContain(a.secret);
  });

  it("A's own tokens reach A's objects (the matrix above is not vacuous)", async () => {
    for (const who of ['aAdmin', 'aMember'] as const) {
      expect((await call('GET', `/api/v1/deployments/${a.deployment}`, tokens[who])).status).toBe(200);
      expect((await call('GET', `/api/v1/tasks/${a.taskId}`, tokens[who])).status).toBe(200);
      const machine = await call('GET', `/api/v1/machines/${a.machineId}`, tokens[who]);
      expect(machine.status).toBe(200);
      expect(machine.body.networkInterfaces).toEqual([]);
      expect(machine.text).not.toContain('10.1.2.3');
      expect((await call('GET', '/api/v1/machines', tokens[who])).body.map((m: { id: string }) => m.id)).toEqual([a.machineId]);
    }
  });

  it('workspace tokens get 403 on every operator route; the operator is allowed', async () => {
    const failures: string[] = [];
    const operatorRoutes = routes.filter(([m, p]) => ROUTES[`${m} ${p}`]?.access === 'operator');
    expect(operatorRoutes.length).toBeGreaterThanOrEqual(7);
    for (const [method, path] of operatorRoutes) {
      const route = ROUTES[`${method} ${path}`];
      const url = path.replace('{name}', 'default').replace('{id}', 'no-such-machine');
      for (const who of ['aAdmin', 'aMember', 'bAdmin', 'bMember'] as const) {
        const res = await call(method, url, tokens[who], route.body?.(a));
        if (res.status !== 403) failures.push(`${who} ${method} ${url}: ${res.status}`);
      }
      const res = await call(method, url, OPERATOR, route.body?.(a));
      if ([401, 403].includes(res.status) || res.status >= 500) failures.push(`operator ${method} ${url}: ${res.status}`);
    }
    expect(failures).toEqual([]);
    // Usage across workspaces and by machine are operator views too.
    expect((await call('GET', '/api/v1/usage?group_by=machine', tokens.aAdmin)).status).toBe(403);
    expect((await call('GET', '/api/v1/usage?group_by=machine', OPERATOR)).status).toBe(200);
    expect((await call('GET', `/api/v1/usage?workspace=${a.workspaceId}`, OPERATOR)).status).toBe(200);
    // A workspace admin never makes an operator token.
    expect((await call('POST', '/api/v1/tokens', tokens.aAdmin, { name: 'x', role: 'operator' })).status).toBe(403);
  });
});
