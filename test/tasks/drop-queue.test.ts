import { createHash } from 'node:crypto';
import { jetstreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { connectNats } from '#tern/messaging';
import { callGateway, runningGateway } from '../support/gateway.js';
import { TEST_NATS } from '../support/isolation.js';
import { waitFor } from '../support/processes.js';

const OPERATOR = `tern_${'q'.repeat(43)}`;

/**
 * Deleting a task queue removes its waiting tasks' messages from TASKS, through the gateway's own
 * least-privilege NATS user (which may delete a TASKS message by sequence, never purge the stream).
 */
describe('a deleted task queue', () => {
  const gateway = runningGateway('dropq', OPERATOR);
  let nc: NatsConnection;

  beforeAll(async () => {
    nc = await connectNats({ ...TEST_NATS, name: 'drop-queue-test' });
  });
  afterAll(async () => {
    await nc?.close();
  });

  const call = (method: string, path: string, token: string, body?: unknown, contentType?: string) =>
    callGateway(gateway.base, method, path, token, body, { contentType, timeoutMs: 10_000 });

  /** Messages in the namespace's TASKS stream on one deployment's subjects. */
  const queued = async (deploymentId: string) => {
    const jsm = await jetstreamManager(nc);
    const info = await jsm.streams.info(`${gateway.namespace}_TASKS`, { subjects_filter: `${gateway.namespace}.tasks.${deploymentId}.>` });
    return Object.values(info.state.subjects ?? {}).reduce((a, b) => a + b, 0);
  };

  it("leaves none of its messages in TASKS, and keeps another queue's", async () => {
    const w = (await call('POST', '/api/v1/workspaces', OPERATOR, { name: 'dropq' })).body;
    const bundle = Buffer.from('queue code');
    const digest = `sha256:${createHash('sha256').update(bundle).digest('hex')}`;
    expect((await call('PUT', `/api/v1/code/${digest}`, w.token, bundle, 'application/gzip')).status).toBe(201);
    const deploy = async (name: string) => {
      const res = await call('POST', '/api/v1/deployments', w.token, { name, kind: 'task_queue', handler: 'app.py:f', code: digest });
      expect(res.status).toBe(201);
      return res.body.deploymentId as string;
    };
    const doomed = await deploy('doomed');
    const kept = await deploy('kept');
    // No machine runs them: every task waits in TASKS.
    for (let i = 0; i < 5; i++) expect((await call('POST', '/taskqueue/doomed', w.token, { i })).status).toBe(202);
    expect((await call('POST', '/taskqueue/kept', w.token, { i: 0 })).status).toBe(202);
    await waitFor('five queued', async () => (await queued(doomed)) === 5);

    expect((await call('DELETE', '/api/v1/deployments/doomed', w.token)).status).toBe(200);
    await waitFor('no message left of the deleted queue', async () => (await queued(doomed)) === 0, 10_000);
    expect(await queued(kept)).toBe(1);
  });
});
