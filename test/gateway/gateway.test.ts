import { tern } from '../machines/harness.js';
import { runningGateway } from '../support/gateway.js';

const ADMIN = `tern_${'a'.repeat(43)}`;

describe('gateway API: tokens, workspaces, errors', () => {
  const gateway = runningGateway('gw', ADMIN);
  let base: string;

  const call = async (method: string, path: string, token?: string, body?: unknown) => {
    const res = await fetch(`${base}${path}`, {
      method,
      headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), ...(body ? { 'content-type': 'application/json' } : {}) },
      body: body ? JSON.stringify(body) : undefined,
    });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : undefined, headers: res.headers };
  };

  beforeAll(() => {
    base = gateway.base;
  });

  it('answers 401 with a message when the token is missing, malformed or wrong', async () => {
    const missing = await call('GET', '/api/v1/workspace');
    expect(missing.status).toBe(401);
    expect(missing.body.message).toMatch(/missing token/);
    const malformed = await fetch(`${base}/api/v1/workspace`, { headers: { authorization: 'Token abc' } });
    expect(malformed.status).toBe(401);
    expect(((await malformed.json()) as { message: string }).message).toMatch(/expected "Bearer <token>"/);
    const wrong = await call('GET', '/api/v1/workspace', 'tern_wrong');
    expect(wrong.status).toBe(401);
    expect(wrong.body.message).toBe('invalid or revoked token');
  });

  it('accepts the bootstrap token as the operator, in the default workspace', async () => {
    const me = await call('GET', '/api/v1/workspace', ADMIN);
    expect(me.status).toBe(200);
    expect(me.body).toMatchObject({ name: 'default', role: 'operator' });
  });

  it('issues, lists and revokes tokens; a revoked token gets 401', async () => {
    const created = await call('POST', '/api/v1/tokens', ADMIN, { name: 'ci' });
    expect(created.status).toBe(201);
    expect(created.body.token).toMatch(/^tern_[A-Za-z0-9_-]{43}$/);
    expect(created.body.role).toBe('member');
    const member = created.body.token as string;
    expect((await call('GET', '/api/v1/workspace', member)).status).toBe(200);

    const listed = await call('GET', '/api/v1/tokens', member);
    expect(listed.body.map((t: { name: string }) => t.name)).toEqual(expect.arrayContaining(['ci', 'operator (bootstrap)']));
    expect(JSON.stringify(listed.body)).not.toContain(member);

    const forbidden = await call('POST', '/api/v1/workspaces', member, { name: 'other' });
    expect(forbidden.status).toBe(403);

    expect((await call('DELETE', `/api/v1/tokens/${created.body.id}`, ADMIN)).status).toBe(204);
    expect((await call('GET', '/api/v1/workspace', member)).status).toBe(401);
  });

  it('issues a token with an expiry: listed with it, accepted until then, then 401 saying it expired', async () => {
    const past = await call('POST', '/api/v1/tokens', ADMIN, { name: 'late', expiresAt: '2020-01-01T00:00:00Z' });
    expect(past.status).toBe(400);
    expect(past.body.message).toMatch(/expiresAt 2020-01-01T00:00:00.000Z is not in the future/);
    const garbled = await call('POST', '/api/v1/tokens', ADMIN, { name: 'late', expiresAt: 'tomorrow' });
    expect(garbled.status).toBe(400);
    expect(garbled.body.message).toEqual([expect.stringMatching(/^expiresAt must be an ISO 8601 date-time/)]);

    const expiresAt = new Date(Date.now() + 1500).toISOString();
    const short = await call('POST', '/api/v1/tokens', ADMIN, { name: 'short-lived', expiresAt });
    expect(short.status).toBe(201);
    expect(short.body.expiresAt).toBe(expiresAt);
    const listed = await call('GET', '/api/v1/tokens', ADMIN);
    expect(listed.body.find((t: { name: string }) => t.name === 'short-lived').expiresAt).toBe(expiresAt);
    expect(listed.body.find((t: { name: string }) => t.name === 'operator (bootstrap)').expiresAt).toBeNull();

    expect((await call('GET', '/api/v1/workspace', short.body.token)).status).toBe(200);
    await new Promise((r) => setTimeout(r, Date.parse(expiresAt) - Date.now() + 100));
    const expired = await call('GET', '/api/v1/workspace', short.body.token);
    expect(expired.status).toBe(401);
    expect(expired.body.message).toBe(`token expired at ${expiresAt}: ask a workspace admin for a new one (tern token create)`);
  });

  it('creates, lists and revokes tokens from the CLI, with an expiry', async () => {
    const created = await tern(['token', 'create', 'cli-made', '--expires', '30d', '--json'], base, ADMIN);
    expect(created.code).toBe(0);
    const token = JSON.parse(created.stdout) as { id: string; expiresAt: string };
    expect(Date.parse(token.expiresAt) - Date.now()).toBeGreaterThan(29 * 86_400_000);
    const listed = await tern(['token', 'list'], base, ADMIN);
    expect(listed.stdout).toMatch(/^ID +NAME +ROLE +PREFIX +CREATED +LAST USED +EXPIRES$/m);
    expect(listed.stdout).toMatch(
      new RegExp(`^${token.id} +cli-made +member +tern_\\S+ +\\S+ +never +${token.expiresAt.replace(/\./g, '\\.')}$`, 'm'),
    );
    const bad = await tern(['token', 'create', 'x', '--expires', 'soon'], base, ADMIN);
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toMatch(/must be a duration \(90m, 12h, 30d, 8w\) or a date/);
    expect((await tern(['token', 'revoke', token.id], base, ADMIN)).stdout).toBe(`Token ${token.id} revoked.\n`);
  });

  it('creates workspaces with their own admin token, scoped to themselves', async () => {
    const made = await call('POST', '/api/v1/workspaces', ADMIN, { name: 'acme-ml' });
    expect(made.status).toBe(201);
    const theirs = await call('GET', '/api/v1/workspace', made.body.token);
    expect(theirs.body).toMatchObject({ name: 'acme-ml', role: 'admin' });
    // A workspace admin manages its own tokens, and never becomes (or makes) an operator.
    const operator = await call('POST', '/api/v1/tokens', made.body.token, { name: 'sneaky', role: 'operator' });
    expect(operator.status).toBe(403);
    expect(operator.body.message).toMatch(/^this action needs an operator token/);
    expect((await call('POST', '/api/v1/tokens', made.body.token, { name: 'ci', role: 'admin' })).status).toBe(201);
    const platform = await call('POST', '/api/v1/workspaces', made.body.token, { name: 'acme-2' });
    expect(platform.status).toBe(403);
    expect(platform.body.message).toBe('this action needs an operator token');
    const ops2 = await call('POST', '/api/v1/tokens', ADMIN, { name: 'ops-2', role: 'operator' });
    expect(ops2.status).toBe(201);
    expect((await call('POST', '/api/v1/pools', ops2.body.token, { name: 'by-ops-2' })).status).toBe(201);
    // An admin of the operator's workspace cannot revoke an operator token.
    const defaultAdmin = (await call('POST', '/api/v1/tokens', ADMIN, { name: 'default-admin', role: 'admin' })).body.token;
    expect((await call('DELETE', `/api/v1/tokens/${ops2.body.id}`, defaultAdmin)).status).toBe(403);
    expect((await call('DELETE', `/api/v1/tokens/${ops2.body.id}`, ops2.body.token)).status).toBe(204);
    const again = await call('POST', '/api/v1/workspaces', ADMIN, { name: 'acme-ml' });
    expect(again.status).toBe(409);
    expect(again.body.message).toBe('workspace "acme-ml" already exists');
  });

  it('rejects bad bodies with 400 naming the field and the rule', async () => {
    const bad = await call('POST', '/api/v1/workspaces', ADMIN, { name: 'Not OK!', color: 'red' });
    expect(bad.status).toBe(400);
    expect(bad.body.message).toEqual(
      expect.arrayContaining([expect.stringMatching(/^name must be 2-63 lower-case/), 'property color should not exist']),
    );
    const badRole = await call('POST', '/api/v1/tokens', ADMIN, { name: 'x', role: 'root' });
    expect(badRole.status).toBe(400);
    expect(badRole.body.message.join(' ')).toMatch(/role must be one of the following values: operator, admin, member/);
    const badJson = await fetch(`${base}/api/v1/tokens`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' },
      body: '{"name":',
    });
    expect(badJson.status).toBe(400);
    const badId = await call('DELETE', '/api/v1/tokens/not-a-uuid', ADMIN);
    expect(badId.status).toBe(400);
  });

  it('serves OpenAPI, metrics and liveness without a token', async () => {
    const spec = await call('GET', '/docs-json');
    expect(spec.status).toBe(200);
    expect(Object.keys(spec.body.paths)).toEqual(expect.arrayContaining(['/api/v1/workspace', '/api/v1/tokens', '/health/ready']));
    const metrics = await fetch(`${base}/metrics`);
    expect(metrics.status).toBe(200);
    expect(await metrics.text()).toContain('tern_process_cpu_seconds_total{service="gateway"}');
    expect((await call('GET', '/health/live')).status).toBe(200);
    expect((await call('GET', '/health/self')).body.status).toBe('ok');
  });

  it('reports the system degraded, naming what is down, while only the gateway runs', async () => {
    const ready = await call('GET', '/health/ready');
    expect(ready.status).toBe(503);
    expect(ready.body.status).toBe('degraded');
    expect(ready.body.services.gateway.status).toBe('up');
    expect(ready.body.services.scheduler.status).toBe('down');
    expect(ready.body.agents).toEqual([]);
  });
});
