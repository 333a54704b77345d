import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { createAccount } from '@nats-io/nkeys';
import { type AccountSigner, formatCreds, inboxPrefix, issueUserJwt, newUserKey } from '#tern/nats-auth';
import { TEST_NATS_URL, uniqueName } from '../support/isolation.js';
import { connectTestNats } from '../support/nats.js';
import { connectAs, machineCreds, natsAuthDir, refused, serviceCredsFile } from '../support/nats-users.js';

/**
 * NATS as every service and machine meets it: operator mode, no anonymous access, each user
 * held to what the permissions table gives it (libs/contracts/src/permissions.ts).
 */
describe('NATS operator mode', () => {
  const ns = uniqueName('auth');
  const dir = mkdtempSync(join(tmpdir(), 'tern-auth-test-'));
  const open: NatsConnection[] = [];
  afterAll(async () => {
    await Promise.all(open.map((nc) => nc.close().catch(() => undefined)));
    rmSync(dir, { recursive: true, force: true });
  });

  it('refuses an anonymous connection', async () => {
    await expect(connect({ servers: TEST_NATS_URL, reconnect: false })).rejects.toThrow(/Authorization Violation/);
  });

  it('refuses a user signed by a key the account does not trust', async () => {
    const { account } = JSON.parse(readFileSync(join(natsAuthDir(), 'signer.json'), 'utf8')) as AccountSigner;
    const rogueSigner = new TextDecoder().decode(createAccount().getSeed());
    const user = newUserKey();
    const jwt = await issueUserJwt(
      { account, signingKey: rogueSigner },
      { name: 'rogue', publicKey: user.publicKey, permissions: { pub: { allow: ['>'] }, sub: { allow: ['>'] } } },
    );
    await expect(connectAs(formatCreds(jwt, user.seed), '_INBOX')).rejects.toThrow(/Authorization Violation/);
  });

  it("holds a service to its table entry: no other service's bucket writes, no stream deletion, no one else's replies", async () => {
    const creds = readFileSync(serviceCredsFile('metering', ns), 'utf8');
    const nc = await connectAs(creds, inboxPrefix(ns, 'metering'));
    open.push(nc);
    await refused(nc, 'publish', `$KV.${ns}_routes.c1`, () => nc.publish(`$KV.${ns}_routes.c1`, 'x'));
    await refused(nc, 'publish', `$JS.API.STREAM.DELETE.${ns}_EVENTS`, () => nc.publish(`$JS.API.STREAM.DELETE.${ns}_EVENTS`));
    await refused(nc, 'subscription', '_INBOX.>', () => nc.subscribe('_INBOX.>'));
    await refused(nc, 'subscription', '>', () => nc.subscribe('>'));
    expect(nc.isClosed()).toBe(false);
  });

  it("holds a machine to its own id: its heartbeats yes, another machine's commands and heartbeats no", async () => {
    const nc = await connectAs(await machineCreds(ns, 'm-own'), inboxPrefix(ns, 'agent', 'm-own'));
    open.push(nc);
    const own = nc.subscribe(`${ns}.agent.m-own.container.start.v1`);
    const harness = await connectTestNats();
    open.push(harness);
    const heard = harness.subscribe(`${ns}.heartbeat.m-own.v1`, { max: 1 });
    await harness.flush();
    nc.publish(`${ns}.heartbeat.m-own.v1`, '{}');
    for await (const m of heard) expect(m.subject).toBe(`${ns}.heartbeat.m-own.v1`);
    // Core NATS beats alike: its own subject heard, another's refused, and none of them its to hear.
    const beat = harness.subscribe(`${ns}.beat.m-own.v1`, { max: 1 });
    await harness.flush();
    nc.publish(`${ns}.beat.m-own.v1`, '{}');
    for await (const m of beat) expect(m.subject).toBe(`${ns}.beat.m-own.v1`);
    await refused(nc, 'publish', `${ns}.beat.m-other.v1`, () => nc.publish(`${ns}.beat.m-other.v1`, '{}'));
    await refused(nc, 'subscription', `${ns}.beat.*.v1`, () => nc.subscribe(`${ns}.beat.*.v1`));
    expect(own.isClosed()).toBe(false);
    await refused(nc, 'subscription', `${ns}.agent.m-other.container.start.v1`, () =>
      nc.subscribe(`${ns}.agent.m-other.container.start.v1`),
    );
    await refused(nc, 'publish', `${ns}.heartbeat.m-other.v1`, () => nc.publish(`${ns}.heartbeat.m-other.v1`, '{}'));
    await refused(nc, 'publish', `$KV.${ns}_reputation.m-own`, () => nc.publish(`$KV.${ns}_reputation.m-own`, '{"score":1}'));
    await refused(nc, 'publish', `${ns}.command.scale.d1.v1`, () => nc.publish(`${ns}.command.scale.d1.v1`, '{}'));
    await refused(nc, 'subscription', `${inboxPrefix(ns, 'gateway')}.>`, () => nc.subscribe(`${inboxPrefix(ns, 'gateway')}.>`));
  });

  it('disconnects a machine whose user expires', async () => {
    const nc = await connectAs(await machineCreds(ns, 'm-brief', 2), inboxPrefix(ns, 'agent', 'm-brief'));
    const started = Date.now();
    const err = await nc.closed();
    expect(String(err)).toMatch(/expired/i);
    expect(Date.now() - started).toBeLessThan(5000);
  });
});
