import 'reflect-metadata';
import { Logger } from '@nestjs/common';
import type { NatsConnection } from '@nats-io/transport-node';
import { TASK_ENDED, type TaskEnded } from '#tern/contracts';
import { connectNats, Messaging, Namespace } from '#tern/messaging';
import { TaskWaiters } from '../../apps/gateway/src/tasks/task-waiters.js';
import { TEST_NATS, uniqueName } from '../support/isolation.js';
import { deleteNamespaces } from '../support/nats.js';
import { waitFor } from '../support/processes.js';

const quiet = new Logger('test');
quiet.log = quiet.warn = quiet.error = () => undefined;

const ended = (taskId: string): TaskEnded => ({ taskId, workspaceId: 'w1', state: 'COMPLETE', endedAt: new Date().toISOString() });

/** Two gateway replicas' TaskWaiters, each on its own connection, over a real NATS server. */
describe('TaskWaiters: one reader of task ends per gateway', () => {
  const ns = new Namespace(uniqueName('waiters'));
  const connections: NatsConnection[] = [];
  const replicas: { waiters: TaskWaiters; heard: string[] }[] = [];

  beforeAll(async () => {
    for (const name of ['gateway-a', 'gateway-b']) {
      const nc = await connectNats({ ...TEST_NATS, name }, quiet);
      connections.push(nc);
      const waiters = new TaskWaiters(new Messaging(nc, ns));
      const heard: string[] = [];
      waiters.onEnded((taskId) => heard.push(taskId));
      waiters.onApplicationBootstrap();
      replicas.push({ waiters, heard });
    }
    await Promise.all(connections.map((nc) => nc.flush()));
  });

  afterAll(async () => {
    for (const { waiters } of replicas) waiters.onApplicationShutdown();
    await Promise.all(connections.map((nc) => nc.close()));
    await deleteNamespaces(ns.name);
  });

  it("tells its own ends in-process once, drops their echo unread, and hears another replica's from NATS", async () => {
    const [a, b] = replicas;
    const toIntegrator: string[] = [];
    const integrator = connections[1].subscribe(new Messaging(connections[1], ns).subject(TASK_ENDED, ['w1']), {
      callback: (_err, m) => void toIntegrator.push(m.json<TaskEnded>().taskId),
    });
    await connections[1].flush();
    const waiting = a.waiters.next('t-own', 10_000);

    a.waiters.announce(ended('t-own'));
    // In-process, before anything came back from NATS: the waiter and every listener have it.
    expect(a.heard).toEqual(['t-own']);
    await expect(waiting).resolves.toBeUndefined();

    await waitFor('the other replica and the integrator heard it', async () => b.heard.length === 1 && toIntegrator.length === 1, 5_000);
    // Its own notice has long come back to replica A (a later notice of B's came after it): not told twice.
    b.waiters.announce(ended('t-other'));
    await waitFor("replica A heard B's end", async () => a.heard.length === 2, 5_000);
    expect(a.heard).toEqual(['t-own', 't-other']);
    expect(b.heard).toEqual(['t-own', 't-other']);
    expect(toIntegrator).toEqual(['t-own', 't-other']);
    integrator.unsubscribe();
  });
});
