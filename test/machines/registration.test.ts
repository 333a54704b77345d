import pg from 'pg';
import type { NatsConnection, Subscription } from '@nats-io/transport-node';
import { MACHINE_BEAT, MACHINE_DISCOVERED, MACHINE_REGISTERED, MACHINE_STATE_CHANGED } from '#tern/contracts';
import { connectNats, Messaging, Namespace } from '#tern/messaging';
import { createTestSchema, TEST_NATS, type TestSchema, testEnv, uniqueName } from '../support/isolation.js';
import { deleteNamespaces } from '../support/nats.js';
import { freePort, ServiceProcess, waitFor } from '../support/processes.js';
import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { removeStateDir, tempStateDir, ternAgent } from '../agent/harness.js';
import { ADMIN, client, registration, tern } from './harness.js';

interface Seen {
  subject: string;
  msgId?: string;
  data: any;
}

/** Join tokens, machine tokens and admin-token registration against a real gateway. */
describe('machine tokens and registration', () => {
  let schema: TestSchema;
  let ns: Namespace;
  let gateway: ServiceProcess;
  let base: string;
  let call: ReturnType<typeof client>;
  let member: string;
  let nc: NatsConnection;
  let db: pg.Client;
  const seen: Seen[] = [];
  const subs: Subscription[] = [];

  const listen = (subject: string) => {
    const sub = nc.subscribe(subject, {
      callback: (_e, m) => void seen.push({ subject: m.subject, msgId: m.headers?.get('Nats-Msg-Id'), data: m.json() }),
    });
    subs.push(sub);
  };
  const events = (contract: { subject: string }, machineId: string) =>
    seen.filter((s) => s.subject === ns.subject(contract.subject).replace('*', machineId) && s.data.machineId === machineId);

  beforeAll(async () => {
    schema = await createTestSchema('mreg');
    ns = new Namespace(uniqueName('mreg'));
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    call = client(base);
    gateway = new ServiceProcess(
      'gateway',
      testEnv(schema, ns.name, {
        HTTP_PORT: String(port),
        BOOTSTRAP_ADMIN_TOKEN: ADMIN,
        MACHINE_JOIN_TOKEN_TTL_SECONDS: '60',
        NATS_PUBLIC_URL: 'nats://nats.example.com:4222',
        MACHINE_HEARTBEAT_INTERVAL_SECONDS: '5',
        MACHINE_HEARTBEAT_TTL_SECONDS: '20',
      }),
    ).start();
    nc = await connectNats({ ...TEST_NATS, name: 'registration-test' });
    const messaging = new Messaging(nc, ns);
    for (const c of [MACHINE_REGISTERED, MACHINE_DISCOVERED, MACHINE_STATE_CHANGED, MACHINE_BEAT]) listen(messaging.subject(c));
    await gateway.ready();
    member = (await call('POST', '/api/v1/tokens', ADMIN, { name: 'viewer' })).body.token;
    await call('POST', '/api/v1/pools', ADMIN, { name: 'gpu', allowedGpuTypes: ['H100'], minNetworkMbps: 250 });
    db = new pg.Client({ connectionString: schema.url, options: `-c search_path=${schema.schema}` });
    await db.connect();
  });

  afterAll(async () => {
    subs.forEach((s) => s.unsubscribe());
    await gateway?.stop();
    await db?.end();
    await nc?.close();
    await schema?.drop();
    await deleteNamespaces(ns.name);
  });

  it('creates a pending machine with a one-time join token and the line to run on the worker', async () => {
    const before = Date.now();
    const made = await call('POST', '/api/v1/machines', ADMIN, { pool: 'gpu', machineId: 'box-1' });
    expect(made.status).toBe(201);
    expect(made.body).toMatchObject({ machineId: 'box-1', pool: 'gpu' });
    expect(made.body.joinToken).toMatch(/^tern_join_[A-Za-z0-9_-]{43}$/);
    const ttl = Date.parse(made.body.expiresAt) - before;
    expect(ttl).toBeGreaterThan(59_000);
    expect(ttl).toBeLessThan(62_000);
    expect(made.body.command).toBe(`tern-agent init --gateway ${base} --token ${made.body.joinToken} --pool gpu`);

    const { rows } = await db.query(`SELECT state, join_token_hash FROM machines WHERE id = 'box-1'`);
    expect(rows[0].state).toBe('pending');
    expect(rows[0].join_token_hash).toMatch(/^[0-9a-f]{64}$/);
    expect(JSON.stringify(rows)).not.toContain(made.body.joinToken);

    const random = await call('POST', '/api/v1/machines', ADMIN, { pool: 'default' });
    expect(random.body.machineId).toMatch(/^m-[0-9a-f]{10}$/);
  });

  it('takes the public URL from proxy headers', async () => {
    const res = await fetch(`${base}/api/v1/machines`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${ADMIN}`,
        'content-type': 'application/json',
        'x-forwarded-proto': 'https',
        'x-forwarded-host': 'tern.example.com',
      },
      body: JSON.stringify({ pool: 'default' }),
    });
    expect(((await res.json()) as { command: string }).command).toMatch(/^tern-agent init --gateway https:\/\/tern\.example\.com --token /);
  });

  it('refuses machine create for an unknown pool, a taken id, a bad body or a member token', async () => {
    const nowhere = await call('POST', '/api/v1/machines', ADMIN, { pool: 'nowhere' });
    expect(nowhere.status).toBe(404);
    expect(nowhere.body.message).toMatch(/^pool "nowhere" not found/);
    const taken = await call('POST', '/api/v1/machines', ADMIN, { pool: 'gpu', machineId: 'box-1' });
    expect(taken.status).toBe(409);
    expect(taken.body.message).toMatch(/^machine "box-1" already exists/);
    const bad = await call('POST', '/api/v1/machines', ADMIN, { machineId: 'has space', extra: 1 });
    expect(bad.status).toBe(400);
    expect(bad.body.message).toEqual(
      expect.arrayContaining([
        'pool must be a string',
        'machineId must be 1-64 letters, digits, - or _',
        'property extra should not exist',
      ]),
    );
    expect((await call('POST', '/api/v1/machines', member, { pool: 'gpu' })).status).toBe(403);
  });

  it('redeems a join token once: registered, machine token issued, events published; a second use is 401 "already used"', async () => {
    const made = await call('POST', '/api/v1/machines', ADMIN, { pool: 'gpu', machineId: 'box-2' });
    const first = await call('POST', '/api/v1/machine/register', made.body.joinToken, registration('gpu'));
    expect(first.status).toBe(200);
    expect(first.body).toEqual({
      machineId: 'box-2',
      pool: 'gpu',
      machineToken: expect.stringMatching(/^tern_machine_[A-Za-z0-9_-]{43}$/),
      nats: { servers: ['nats://nats.example.com:4222'], namespace: ns.name },
      heartbeatIntervalSeconds: 5,
      heartbeatTtlSeconds: 20,
      minNetworkMbps: 250,
    });

    const { rows } = await db.query(`SELECT * FROM machines WHERE id = 'box-2'`);
    expect(rows[0]).toMatchObject({
      state: 'registered',
      state_reason: 'agent registered with its join token',
      hostname: 'worker-1',
      cpu_model: 'AMD EPYC 7B13',
      cpu_cores: 8,
      cpu_threads: 16,
      agent_version: '0.1.0',
      os: expect.objectContaining({ distro: 'Ubuntu' }),
      disks: [expect.objectContaining({ mount: '/' })],
      network: { interfaces: [expect.objectContaining({ name: 'eth0', speedMbps: 10000 })] },
      gpus: [expect.objectContaining({ model: 'NVIDIA H100 80GB HBM3', memoryBytes: 81559 * 1024 * 1024 })],
    });
    expect(rows[0].registered_at).toBeInstanceOf(Date);
    expect(rows[0].credential_hash).toMatch(/^[0-9a-f]{64}$/);

    await waitFor(
      'registration events',
      async () => events(MACHINE_STATE_CHANGED, 'box-2').length === 1 && events(MACHINE_DISCOVERED, 'box-2').length === 1,
    );
    const [registered] = events(MACHINE_REGISTERED, 'box-2');
    expect(registered.data).toMatchObject({ pool: 'gpu', hostname: 'worker-1', agentVersion: '0.1.0' });
    expect(registered.msgId).toBe(`box-2:registered:${registered.data.registeredAt}`);
    const [discovered] = events(MACHINE_DISCOVERED, 'box-2');
    expect(discovered.data).toMatchObject({ cpu: { cores: 8 }, gpus: [expect.objectContaining({ memoryMiB: 81559 })] });
    const [changed] = events(MACHINE_STATE_CHANGED, 'box-2');
    expect(changed.data).toMatchObject({ from: 'pending', to: 'registered', pool: 'gpu' });
    expect(changed.msgId).toBe(`box-2:registered:${changed.data.changedAt}`);

    const second = await call('POST', '/api/v1/machine/register', made.body.joinToken, registration('gpu'));
    expect(second.status).toBe(401);
    expect(second.body.message).toMatch(/^join token already used/);
  });

  it('lets exactly one of several simultaneous registrations redeem a join token', async () => {
    const made = await call('POST', '/api/v1/machines', ADMIN, { pool: 'gpu', machineId: 'box-race' });
    const replies = await Promise.all(
      Array.from({ length: 5 }, () => call('POST', '/api/v1/machine/register', made.body.joinToken, registration('gpu'))),
    );
    expect(replies.map((r) => r.status).sort()).toEqual([200, 401, 401, 401, 401]);
    expect(replies.filter((r) => r.status === 401).every((r) => /^join token already used/.test(r.body.message))).toBe(true);
    await waitFor('one registration event', async () => events(MACHINE_REGISTERED, 'box-race').length >= 1);
    await new Promise((r) => setTimeout(r, 300));
    expect(events(MACHINE_REGISTERED, 'box-race')).toHaveLength(1);
  });

  it('answers 401 for an expired join token, saying when it expired', async () => {
    const made = await call('POST', '/api/v1/machines', ADMIN, { pool: 'gpu', machineId: 'box-3' });
    await db.query(`UPDATE machines SET join_token_expires_at = now() - interval '1 minute' WHERE id = 'box-3'`);
    const { rows } = await db.query(`SELECT join_token_expires_at FROM machines WHERE id = 'box-3'`);
    const late = await call('POST', '/api/v1/machine/register', made.body.joinToken, registration('gpu'));
    expect(late.status).toBe(401);
    expect(late.body.message).toBe(
      `join token expired at ${(rows[0].join_token_expires_at as Date).toISOString()}; create a new one with tern machine create`,
    );
  });

  it('answers 401 for a missing or unknown token, and a member API token cannot register', async () => {
    const none = await call('POST', '/api/v1/machine/register', undefined, registration('gpu'));
    expect(none.status).toBe(401);
    expect(none.body.message).toMatch(/^missing token/);
    const unknown = await call('POST', '/api/v1/machine/register', 'tern_join_nope', registration('gpu'));
    expect(unknown.status).toBe(401);
    expect(unknown.body.message).toMatch(/^unknown token/);
    // Authentication comes first: a stranger is not told what the body should look like.
    expect((await call('POST', '/api/v1/machine/register', 'tern_join_nope', {})).status).toBe(401);
    const asMember = await call('POST', '/api/v1/machine/register', member, registration('gpu', { machineId: 'sneaky' }));
    expect(asMember.status).toBe(403);
  });

  it('answers 400 naming every missing or broken field of the registration body', async () => {
    const made = await call('POST', '/api/v1/machines', ADMIN, { pool: 'gpu', machineId: 'box-4' });
    const noInventory = await call('POST', '/api/v1/machine/register', made.body.joinToken, { pool: 'gpu' });
    expect(noInventory.status).toBe(400);
    expect(noInventory.body.message).toEqual(expect.arrayContaining(['agentVersion must be a string', 'inventory must be an object']));

    const body = registration('gpu');
    const { cpu: _cpu, ...inventory } = body.inventory;
    const partial = await call('POST', '/api/v1/machine/register', made.body.joinToken, {
      ...body,
      inventory: { ...inventory, gpus: [{ index: 0, vendor: 'nvidia', model: 'H100' }] },
    });
    expect(partial.status).toBe(400);
    expect(partial.body.message).toEqual(
      expect.arrayContaining([
        'inventory.cpu must be an object',
        expect.stringMatching(/^inventory\.gpus\.0\.memoryMiB /),
        expect.stringMatching(/^inventory\.gpus\.0\.driverVersion /),
      ]),
    );
    // A refused body does not spend the token.
    expect((await call('POST', '/api/v1/machine/register', made.body.joinToken, registration('gpu'))).status).toBe(200);
  });

  it('refuses a body that contradicts the token: another pool or another machine id', async () => {
    const made = await call('POST', '/api/v1/machines', ADMIN, { pool: 'gpu', machineId: 'box-5' });
    const pool = await call('POST', '/api/v1/machine/register', made.body.joinToken, registration('default'));
    expect(pool.status).toBe(409);
    expect(pool.body.message).toMatch(/^pool mismatch: machine "box-5" is in pool "gpu" but the agent asked for "default"/);
    const id = await call('POST', '/api/v1/machine/register', made.body.joinToken, registration('gpu', { machineId: 'other' }));
    expect(id.status).toBe(409);
    expect(id.body.message).toBe('this join token belongs to machine "box-5", not "other"');
  });

  it('registers again with the machine token, keeping the state when the machine is heartbeating', async () => {
    const made = await call('POST', '/api/v1/machines', ADMIN, { pool: 'gpu', machineId: 'box-6' });
    const { machineToken } = (await call('POST', '/api/v1/machine/register', made.body.joinToken, registration('gpu'))).body;

    const again = await call(
      'POST',
      '/api/v1/machine/register',
      machineToken,
      registration('gpu', { agentVersion: '0.2.0', machineId: 'box-6' }),
    );
    expect(again.status).toBe(200);
    expect(again.body.machineId).toBe('box-6');
    expect(again.body.machineToken).toBeUndefined();
    expect((await db.query(`SELECT agent_version FROM machines WHERE id = 'box-6'`)).rows[0].agent_version).toBe('0.2.0');

    // The gateway forgot everything but the credential: the machine comes back from offline.
    await db.query(`UPDATE machines SET state = 'offline' WHERE id = 'box-6'`);
    expect((await call('POST', '/api/v1/machine/register', machineToken, registration('gpu'))).status).toBe(200);
    await waitFor('offline → registered', async () => events(MACHINE_STATE_CHANGED, 'box-6').some((e) => e.data.from === 'offline'));

    await db.query(`UPDATE machines SET state = 'ready' WHERE id = 'box-6'`);
    expect((await call('POST', '/api/v1/machine/register', machineToken, registration('gpu'))).status).toBe(200);
    expect((await db.query(`SELECT state FROM machines WHERE id = 'box-6'`)).rows[0].state).toBe('ready');

    const moved = await call('POST', '/api/v1/machine/register', machineToken, registration('default'));
    expect(moved.status).toBe(409);
  });

  it('registers with the operator API token: creates a new machine from the body, never overwrites an existing one', async () => {
    const missingId = await call('POST', '/api/v1/machine/register', ADMIN, registration('default'));
    expect(missingId.status).toBe(400);
    expect(missingId.body.message).toMatch(/^machineId is required/);
    const badPool = await call('POST', '/api/v1/machine/register', ADMIN, registration('nowhere', { machineId: 'local-1' }));
    expect(badPool.status).toBe(404);

    const created = await call('POST', '/api/v1/machine/register', ADMIN, registration('default', { machineId: 'local-1' }));
    expect(created.status).toBe(200);
    expect(created.body).toMatchObject({ machineId: 'local-1', pool: 'default', machineToken: expect.stringMatching(/^tern_machine_/) });
    expect(created.body.minNetworkMbps).toBeUndefined();
    await waitFor('new machine event', async () => events(MACHINE_STATE_CHANGED, 'local-1').length === 1);
    expect(events(MACHINE_STATE_CHANGED, 'local-1')[0].data).toMatchObject({ from: null, to: 'registered' });

    // Again with the API token: refused, the machine keeps its credential; it registers with its machine token.
    const again = await call('POST', '/api/v1/machine/register', ADMIN, registration('default', { machineId: 'local-1' }));
    expect(again.status).toBe(409);
    expect(again.body.message).toMatch(/^machine "local-1" already exists: an API token never replaces a machine's credential/);
    expect((await call('POST', '/api/v1/machine/register', created.body.machineToken, registration('default'))).status).toBe(200);

    // A pending machine waiting for its join token: not taken over either; the join token still works.
    const made = await call('POST', '/api/v1/machines', ADMIN, { pool: 'gpu', machineId: 'box-7' });
    expect((await call('POST', '/api/v1/machine/register', ADMIN, registration('gpu', { machineId: 'box-7' }))).status).toBe(409);
    expect((await call('POST', '/api/v1/machine/register', made.body.joinToken, registration('gpu'))).status).toBe(200);

    // A workspace admin token is not an operator token.
    const workspace = await call('POST', '/api/v1/workspaces', ADMIN, { name: `reg-${Date.now()}` });
    const byWorkspaceAdmin = await call(
      'POST',
      '/api/v1/machine/register',
      workspace.body.token,
      registration('default', { machineId: 'ws-1' }),
    );
    expect(byWorkspaceAdmin.status).toBe(403);
    expect(byWorkspaceAdmin.body.message).toMatch(/^this action needs an operator token/);
  });

  it('turns a keepalive with the machine token into a heartbeat', async () => {
    const made = await call('POST', '/api/v1/machines', ADMIN, { pool: 'gpu', machineId: 'box-8' });
    const { machineToken } = (await call('POST', '/api/v1/machine/register', made.body.joinToken, registration('gpu'))).body;
    const keepalive = {
      machineId: 'box-8',
      poolName: 'gpu',
      agentVersion: '0.1.0',
      metrics: { cpuUtilizationPct: 37.5, memoryUtilizationPct: 120, freeGpuCount: 0 },
    };
    const ok = await call('POST', '/api/v1/machine/keepalive', machineToken, keepalive);
    expect(ok).toEqual({ status: 200, body: { ok: true } });
    const beat = await waitFor('heartbeat', async () => events(MACHINE_BEAT, 'box-8')[0]);
    expect(beat.data).toMatchObject({
      pool: 'gpu',
      cpuPercent: 37.5,
      memoryPercent: 100,
      sequence: 0,
      gpus: [expect.objectContaining({ state: 'busy' })],
    });

    expect((await call('POST', '/api/v1/machine/keepalive', ADMIN, keepalive)).status).toBe(401);
    expect((await call('POST', '/api/v1/machine/keepalive', machineToken, { ...keepalive, machineId: 'box-1' })).status).toBe(409);
    const bad = await call('POST', '/api/v1/machine/keepalive', machineToken, { metrics: { cpuUtilizationPct: -1 } });
    expect(bad.status).toBe(400);
    expect(bad.body.message).toEqual(
      expect.arrayContaining(['machineId must be 1-64 letters, digits, - or _', 'metrics.cpuUtilizationPct must not be less than 0']),
    );
  });

  it("lists, shows and deletes machines; a deleted machine's token stops working", async () => {
    // A workspace token sees only the machines its work ran on: none yet.
    expect((await call('GET', '/api/v1/machines?pool=gpu', member)).body).toEqual([]);
    expect((await call('GET', '/api/v1/machines/box-2', member)).status).toBe(404);
    expect((await call('GET', '/api/v1/machines/box-2/reputation', member)).status).toBe(404);
    // The member's workspace (the default one) ran a container on box-2.
    const [workspace] = (await db.query(`SELECT id FROM workspaces WHERE name = 'default'`)).rows;
    const [deployment] = (
      await db.query(`INSERT INTO deployments (workspace_id, name, kind) VALUES ($1, 'ran-on-box-2', 'endpoint') RETURNING id`, [
        workspace.id,
      ])
    ).rows;
    const [version] = (
      await db.query(`INSERT INTO deployment_versions (deployment_id, version, spec) VALUES ($1, 1, '{}') RETURNING id`, [deployment.id])
    ).rows;
    await db.query(
      `INSERT INTO containers (id, deployment_version_id, machine_id, state, requested) VALUES ('c-box-2', $1, 'box-2', 'stopped', '{}')`,
      [version.id],
    );
    const stranger = (await call('POST', '/api/v1/workspaces', ADMIN, { name: `stranger-${Date.now()}` })).body.token as string;
    expect((await call('GET', '/api/v1/machines', stranger)).body).toEqual([]);
    expect((await call('GET', '/api/v1/machines/box-2', stranger)).status).toBe(404);

    const list = await call('GET', '/api/v1/machines?pool=gpu', member);
    expect(list.body.map((m: { id: string }) => m.id)).toEqual(['box-2']);
    expect(list.status).toBe(200);
    const box2 = list.body.find((m: { id: string }) => m.id === 'box-2');
    expect(box2).toMatchObject({
      pool: 'gpu',
      state: 'registered',
      cpu: { model: 'AMD EPYC 7B13', cores: 8, threads: 16, usagePercent: null },
      memory: { totalBytes: 64 * 1024 ** 3, usagePercent: null },
      gpus: [{ index: 0, model: 'NVIDIA H100 80GB HBM3', memoryMiB: 81559, vendor: 'nvidia', driverVersion: '550.54' }],
      network: null,
      lastHeartbeatAt: null,
      agentVersion: '0.1.0',
    });
    expect(list.body.every((m: { pool: string }) => m.pool === 'gpu')).toBe(true);
    expect((await call('GET', '/api/v1/machines?state=asleep', member)).status).toBe(400);

    const shown = await call('GET', '/api/v1/machines/box-2', member);
    expect(shown.body).toMatchObject({
      id: 'box-2',
      os: { distro: 'Ubuntu' },
      networkInterfaces: [],
      joinToken: { usedAt: expect.any(String) },
    });
    expect(JSON.stringify(shown.body)).not.toMatch(/hash|eth0|([0-9a-f]{2}:){5}/i);
    expect((await call('GET', '/api/v1/machines/box-2/reputation', member)).status).toBe(200);
    // The operator sees every machine in full.
    const full = await call('GET', '/api/v1/machines/box-2', ADMIN);
    expect(full.body.networkInterfaces).toEqual([expect.objectContaining({ name: 'eth0' })]);
    expect((await call('GET', '/api/v1/machines?pool=gpu', ADMIN)).body.length).toBeGreaterThan(1);
    expect((await call('GET', '/api/v1/machines/nope', member)).status).toBe(404);

    const made = await call('POST', '/api/v1/machines', ADMIN, { pool: 'gpu', machineId: 'box-9' });
    const { machineToken } = (await call('POST', '/api/v1/machine/register', made.body.joinToken, registration('gpu'))).body;
    expect((await call('DELETE', '/api/v1/machines/box-9', member)).status).toBe(403);
    expect((await call('DELETE', '/api/v1/machines/box-9', ADMIN)).status).toBe(204);
    expect((await call('DELETE', '/api/v1/machines/box-9', ADMIN)).status).toBe(404);
    const gone = await call('POST', '/api/v1/machine/register', machineToken, registration('gpu'));
    expect(gone.status).toBe(401);
    expect(gone.body.message).toMatch(/^unknown token/);
  });

  it('rotates a machine token: by the operator, by the machine itself, from both CLIs; the old token stops working at once', async () => {
    const made = await call('POST', '/api/v1/machines', ADMIN, { pool: 'gpu', machineId: 'box-rot' });
    const pending = await call('POST', '/api/v1/machines/box-rot/rotate-token', ADMIN);
    expect(pending.status).toBe(409);
    expect(pending.body.message).toMatch(/has not registered yet/);
    const first = (await call('POST', '/api/v1/machine/register', made.body.joinToken, registration('gpu'))).body.machineToken as string;

    // The operator's rotation; a workspace token cannot, and an unknown machine is 404.
    expect((await call('POST', '/api/v1/machines/box-rot/rotate-token', member)).status).toBe(403);
    expect((await call('POST', '/api/v1/machines/nope/rotate-token', ADMIN)).status).toBe(404);
    const byOperator = await call('POST', '/api/v1/machines/box-rot/rotate-token', ADMIN);
    expect(byOperator.status).toBe(200);
    expect(byOperator.body).toEqual({ machineId: 'box-rot', machineToken: expect.stringMatching(/^tern_machine_/) });
    const stale = await call('POST', '/api/v1/machine/register', first, registration('gpu'));
    expect(stale.status).toBe(401);
    expect(stale.body.message).toMatch(/^unknown token/);
    const second = byOperator.body.machineToken as string;
    expect((await call('POST', '/api/v1/machine/register', second, registration('gpu'))).status).toBe(200);

    // The machine's own rotation takes only its machine token.
    expect((await call('POST', '/api/v1/machine/rotate-token', ADMIN)).status).toBe(401);
    const own = await call('POST', '/api/v1/machine/rotate-token', second);
    expect(own.status).toBe(200);
    expect(own.body.machineId).toBe('box-rot');
    expect((await call('POST', '/api/v1/machine/rotate-token', second)).status).toBe(401);
    expect((await call('POST', '/api/v1/machine/register', second, registration('gpu'))).status).toBe(401);
    const third = own.body.machineToken as string;

    // On the worker: tern-agent rotate-token replaces the token in config.yaml (mode 600).
    const dir = tempStateDir();
    const old = tempStateDir();
    try {
      expect((await ternAgent(['init', '--gateway', base, '--token', third, '--pool', 'gpu', '--state-dir', dir])).code).toBe(0);
      const rotated = await ternAgent(['rotate-token', '--state-dir', dir]);
      expect(rotated).toMatchObject({ code: 0, stdout: expect.stringContaining('machine box-rot: new token saved') });
      const file = parse(readFileSync(join(dir, 'config.yaml'), 'utf8')) as { token: string; machineId: string };
      expect(statSync(join(dir, 'config.yaml')).mode & 0o777).toBe(0o600);
      expect(file.machineId).toBe('box-rot');
      expect(file.token).toMatch(/^tern_machine_/);
      expect(file.token).not.toBe(third);
      expect((await call('POST', '/api/v1/machine/register', third, registration('gpu'))).status).toBe(401);
      expect((await call('POST', '/api/v1/machine/register', file.token, registration('gpu'))).status).toBe(200);
      // A copy of the old file holds a spent token: its rotation is refused and says why.
      expect((await ternAgent(['init', '--gateway', base, '--token', third, '--pool', 'gpu', '--state-dir', old])).code).toBe(0);
      const spent = await ternAgent(['rotate-token', '--state-dir', old]);
      expect(spent.code).toBe(1);
      expect(spent.stderr).toMatch(/the gateway refused to rotate the token \(401: unknown token/);
    } finally {
      removeStateDir(dir);
      removeStateDir(old);
    }

    // The operator from the CLI: prints the line to run on the worker.
    const cli = await tern(['machine', 'rotate-token', 'box-rot'], base, ADMIN);
    expect(cli.code).toBe(0);
    expect(cli.stdout).toMatch(/tern-agent config set token tern_machine_\S+/);
  });

  it('creates and shows machines from the CLI', async () => {
    const created = await tern(['machine', 'create', '--pool', 'gpu', '--id', 'cli-1'], base, ADMIN);
    expect(created.code).toBe(0);
    expect(created.stdout).toMatch(/^Machine cli-1 created in pool gpu\./);
    expect(created.stdout).toMatch(new RegExp(`tern-agent init --gateway ${base} --token tern_join_\\S+ --pool gpu`));

    const shown = await tern(['machine', 'show', 'box-2'], base, member);
    expect(shown.code).toBe(0);
    expect(shown.stdout).toMatch(/^State\s+registered \(agent registered with its join token\)/m);
    expect(shown.stdout).toMatch(/^CPU\s+AMD EPYC 7B13, 8 cores \/ 16 threads$/m);
    expect(shown.stdout).toMatch(/^GPUs\s+0 {2}NVIDIA H100 80GB HBM3 {2}80 GiB {2}driver 550.54$/m);

    const missing = await tern(['machine', 'show', 'nope'], base, member);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toBe('tern: 404 machine "nope" not found\n');
  });
});
