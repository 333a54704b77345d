import { connect, credsAuthenticator, type NatsConnection } from '@nats-io/transport-node';
import { Kvm } from '@nats-io/kv';
import { loadConfig } from '#tern/config';
import { HEARTBEATS_BUCKET } from '#tern/contracts';
import { formatCreds, inboxPrefix, jwtExpiresAt } from '#tern/nats-auth';
import { runningGateway } from '../support/gateway.js';
import { TEST_NATS_URL } from '../support/isolation.js';
import { connectTestNats } from '../support/nats.js';
import { client, joinWithKey, registration } from './harness.js';

const ADMIN = `tern_${'u'.repeat(43)}`;

/** A machine's connection with the JWT the gateway gave it, not reconnecting: the test watches what NATS does to it. */
function connectMachine(jwt: string, seed: string, namespace: string, machineId: string): Promise<NatsConnection> {
  return connect({
    servers: TEST_NATS_URL,
    authenticator: credsAuthenticator(new TextEncoder().encode(formatCreds(jwt, seed))),
    inboxPrefix: inboxPrefix(namespace, 'agent', machineId),
    reconnect: false,
  });
}

/**
 * Each machine its own NATS user: the gateway signs a short-lived JWT for the key the agent
 * generated, a second registration renews it, and deleting the machine revokes the key in the
 * account, which closes its connection at once and refuses it from then on.
 */
describe('machine NATS users', () => {
  const gateway = runningGateway('mnats', ADMIN);
  const call = (...args: Parameters<ReturnType<typeof client>>) => client(gateway.base)(...args);
  const open: NatsConnection[] = [];
  afterAll(() => Promise.all(open.map((nc) => nc.close().catch(() => undefined))));

  beforeAll(async () => {
    expect((await call('POST', '/api/v1/pools', ADMIN, { name: 'mnats' })).status).toBe(201);
  });

  const join = (machineId: string) => joinWithKey(gateway.base, ADMIN, 'mnats', machineId);

  /** Resolves once NATS closed the connection, or says it is still open after 5 s. */
  const closedWithin5s = (nc: NatsConnection) =>
    Promise.race([nc.closed().then(() => 'closed'), new Promise((r) => setTimeout(() => r('still open'), 5000))]);

  it('issues a JWT for the key the machine sent, renews it on registering again, and revokes it when the machine is deleted', async () => {
    const { key, body: first, jwt, namespace } = await join('m-rev');
    const lifetime = jwtExpiresAt(jwt)! - Date.now();
    expect(lifetime).toBeGreaterThan(3.9 * 3600_000);
    expect(lifetime).toBeLessThanOrEqual(4 * 3600_000);
    expect(first.nats.user).toBeUndefined();

    // Renewal: registering again with the machine token gives a fresh JWT for the same key.
    await new Promise((r) => setTimeout(r, 1100));
    const again = await call(
      'POST',
      '/api/v1/machine/register',
      first.machineToken,
      registration('mnats', { natsPublicKey: key.publicKey }),
    );
    expect(again.status).toBe(200);
    expect(jwtExpiresAt(again.body.nats.jwt)!).toBeGreaterThan(jwtExpiresAt(jwt)!);

    const nc = await connectMachine(again.body.nats.jwt, key.seed, namespace, 'm-rev');
    open.push(nc);
    const deleted = Date.now();
    expect((await call('DELETE', '/api/v1/machines/m-rev', ADMIN)).status).toBe(204);
    expect(await closedWithin5s(nc)).toBe('closed');
    expect(Date.now() - deleted).toBeLessThan(5000);
    await expect(connectMachine(again.body.nats.jwt, key.seed, namespace, 'm-rev')).rejects.toThrow(/Authorization Violation|revoked/i);
  });

  it("erases a deleted machine's heartbeat entry, which its own NATS user may do", async () => {
    await join('m-hb');
    const nc = await connectTestNats();
    open.push(nc);
    // Made as the scheduler makes it (Messaging.kv), so the gateway opens the same bucket.
    const ttl = loadConfig('gateway', {}).machines.heartbeatTtlSeconds * 1000;
    const bucket = await new Kvm(nc).create(`${gateway.namespace}_${HEARTBEATS_BUCKET.name}`, { ttl, history: 1, replicas: 1 });
    await bucket.put('m-hb', JSON.stringify({ machineId: 'm-hb', receivedAt: new Date().toISOString() }));
    await bucket.put('m-other', JSON.stringify({ machineId: 'm-other', receivedAt: new Date().toISOString() }));
    expect((await call('DELETE', '/api/v1/machines/m-hb', ADMIN)).status).toBe(204);
    expect(await bucket.get('m-hb')).toBeNull();
    expect((await bucket.get('m-other'))?.operation).toBe('PUT');
  });

  it('revoke cuts a machine off: its connection closes within 5 s, its JWT and its machine token stop working', async () => {
    const { key, body: reg, jwt, namespace } = await join('m-cut');
    const nc = await connectMachine(jwt, key.seed, namespace, 'm-cut');
    open.push(nc);
    const revoked = Date.now();
    expect((await call('POST', '/api/v1/machines/m-cut/revoke', ADMIN)).status).toBe(204);
    expect(await closedWithin5s(nc)).toBe('closed');
    expect(Date.now() - revoked).toBeLessThan(5000);
    await expect(connectMachine(jwt, key.seed, namespace, 'm-cut')).rejects.toThrow(/Authorization Violation|revoked/i);
    const again = await call('POST', '/api/v1/machine/register', reg.machineToken, registration('mnats', { natsPublicKey: key.publicKey }));
    expect(again.status).toBe(401);
    expect((await call('POST', '/api/v1/machines/nope/revoke', ADMIN)).status).toBe(404);
  });

  it('answers 400 for a NATS key that is not an nkey user public key', async () => {
    const made = await call('POST', '/api/v1/machines', ADMIN, { pool: 'mnats', machineId: 'm-badkey' });
    const res = await call('POST', '/api/v1/machine/register', made.body.joinToken, registration('mnats', { natsPublicKey: 'not-a-key' }));
    expect(res.status).toBe(400);
    expect(JSON.stringify(res.body.message)).toMatch(/natsPublicKey must be an nkey user public key/);
  });
});
