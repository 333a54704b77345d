import { createServer, type Server } from 'node:http';
import type { NatsConnection } from '@nats-io/transport-node';
import type { DataSource } from 'typeorm';
import { connectNats, Messaging, Namespace } from '#tern/messaging';
import { Deployment, Task, TasksRepository, Workspace } from '#tern/persistence';
import { CallbackDelivery } from '../../apps/gateway/src/tasks/callback-delivery.js';
import { migratedDatabase } from '../support/database.js';
import { InternetHost } from '../support/internet-host.js';
import { TEST_NATS, uniqueName } from '../support/isolation.js';
import { describeNeeding } from '../support/real-parts.js';

/**
 * Callbacks go to the public internet only: a test host in its own network namespace (a
 * documentation address) stands for the internet; a server on this machine's loopback stands
 * for what a callback must never reach. Nothing is sent to any address no local host holds.
 */
const describeWithNetns = await describeNeeding(['root', 'ip']);

describeWithNetns('task callbacks reach only public addresses', () => {
  const database = migratedDatabase('callbacks');
  let db: DataSource;
  let nc: NatsConnection;
  let delivery: CallbackDelivery;
  let deploymentId: string;
  let workspaceId: string;
  const hosts: InternetHost[] = [];
  let loopback: Server;
  let loopbackPort: number;
  const loopbackHits: string[] = [];

  beforeAll(async () => {
    db = database.db;
    nc = await connectNats({ ...TEST_NATS, name: 'callbacks-test' });
    delivery = new CallbackDelivery(new TasksRepository(db), new Messaging(nc, new Namespace(uniqueName('cb'))));
    workspaceId = (await db.getRepository(Workspace).save({ name: 'callbacks' })).id;
    deploymentId = (
      await db.getRepository(Deployment).save({ workspaceId, name: 'queue', kind: 'task_queue', state: 'ready', latestVersion: 1 })
    ).id;
    loopback = createServer((req, res) => {
      loopbackHits.push(`${req.method} ${req.url}`);
      res.end();
    });
    await new Promise<void>((r) => loopback.listen(0, '127.0.0.1', r));
    loopbackPort = (loopback.address() as { port: number }).port;
  });

  afterAll(async () => {
    await Promise.all(hosts.map((h) => h.stop()));
    loopback?.close();
    await nc?.close();
  });

  async function internetHost(answers?: { status: number; location?: string }[]): Promise<InternetHost> {
    const host = await InternetHost.start(answers);
    hosts.push(host);
    return host;
  }

  /** A completed task whose callback is due now. */
  async function dueCallback(callbackUrl: string): Promise<Task> {
    const t = await db.getRepository(Task).save({
      workspaceId,
      deploymentId,
      state: 'COMPLETE',
      payload: {},
      result: { answer: 42 },
      maxRetries: 3,
      timeoutSeconds: 60,
      callbackUrl,
    });
    await db.query(
      `UPDATE tasks SET callback_state = 'pending', callback_next_at = now() - interval '1 second', ended_at = now() WHERE id = $1`,
      [t.id],
    );
    return t;
  }

  const row = (id: string) => db.getRepository(Task).findOneByOrFail({ id });

  it('POSTs the task to a public address and records the delivery', async () => {
    const host = await internetHost();
    const t = await dueCallback(`${host.url}/done`);
    await delivery.run();
    const [request] = await host.received(1);
    expect(request).toMatchObject({ method: 'POST', path: '/done', headers: { 'x-tern-task-id': t.id } });
    expect(JSON.parse(request.body)).toMatchObject({ task_id: t.id, status: 'COMPLETE', result: { answer: 42 } });
    expect(await row(t.id)).toMatchObject({ callbackState: 'delivered', callbackAttempts: 1, callbackError: null });
  });

  it('refuses a loopback address before sending anything, gives up at once and says why', async () => {
    const t = await dueCallback(`http://127.0.0.1:${loopbackPort}/steal`);
    await delivery.run();
    expect(loopbackHits).toEqual([]);
    const after = await row(t.id);
    expect(after).toMatchObject({ callbackState: 'failed', callbackAttempts: 1, callbackNextAt: null });
    expect(after.callbackError).toMatch(/127\.0\.0\.1 is a loopback address; callbacks go only to public addresses/);
  });

  it('checks the address a name resolves to when it connects', async () => {
    const t = await dueCallback(`http://localhost:${loopbackPort}/steal`);
    await delivery.run();
    expect(loopbackHits).toEqual([]);
    expect((await row(t.id)).callbackError).toMatch(/localhost resolves to (127\.0\.0\.1|::1) is a loopback address/);
  });

  it('does not follow a redirect from a public address to the loopback', async () => {
    const host = await internetHost([{ status: 302, location: `http://127.0.0.1:${loopbackPort}/steal` }]);
    const t = await dueCallback(`${host.url}/hop`);
    await delivery.run();
    await host.received(1);
    expect(loopbackHits).toEqual([]);
    const after = await row(t.id);
    expect(after).toMatchObject({ callbackState: 'failed', callbackAttempts: 1 });
    expect(after.callbackError).toMatch(/answered 302: redirects are not followed/);
  });

  it('retries a public address that answers an error, keeping the reason', async () => {
    const host = await internetHost([{ status: 503 }]);
    const t = await dueCallback(`${host.url}/busy`);
    await delivery.run();
    const after = await row(t.id);
    expect(after).toMatchObject({ callbackState: 'pending', callbackAttempts: 1, callbackError: 'answered 503' });
    expect(after.callbackNextAt!.getTime()).toBeGreaterThan(Date.now());
  });
});
