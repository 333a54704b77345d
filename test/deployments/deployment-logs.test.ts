import { createHash } from 'node:crypto';
import pg from 'pg';
import type { NatsConnection } from '@nats-io/transport-node';
import { CONTAINER_LOG_LINE, subjectFor } from '#tern/contracts';
import { Namespace } from '#tern/messaging';
import { ADMIN, client } from '../machines/harness.js';
import { createTestSchema, type TestSchema, testEnv, uniqueName } from '../support/isolation.js';
import { connectTestNats, deleteNamespaces } from '../support/nats.js';
import { freePort, ServiceProcess, waitFor } from '../support/processes.js';
import { insertMachines } from '../support/rows.js';

const BUNDLE = Buffer.from('the bundle the log tests deploy');
const CODE = `sha256:${createHash('sha256').update(BUNDLE).digest('hex')}`;
const CAP = 2;

/** One open `GET …/logs?follow=true`: what it has received so far, and a way to hang up. */
interface Follow {
  status: number;
  text: () => string;
  message?: string;
  close: () => void;
}

describe('deployment logs: one subscription per followed deployment, a cap per token', () => {
  let schema: TestSchema;
  let ns: Namespace;
  let gateway: ServiceProcess;
  let base: string;
  let call: ReturnType<typeof client>;
  let nc: NatsConnection;
  let db: pg.Client;
  const ids: Record<string, string> = {};

  const follow = async (name: string, token = ADMIN): Promise<Follow> => {
    const aborter = new AbortController();
    const res = await fetch(`${base}/api/v1/deployments/${name}/logs?follow=true`, {
      headers: { authorization: `Bearer ${token}` },
      signal: aborter.signal,
    });
    if (res.status !== 200)
      return { status: res.status, text: () => '', message: ((await res.json()) as { message: string }).message, close: () => {} };
    let text = '';
    const decoder = new TextDecoder();
    void (async () => {
      for await (const chunk of res.body!) text += decoder.decode(chunk as Uint8Array, { stream: true });
    })().catch(() => undefined);
    await waitFor('the stream opened', async () => text.includes('event: info'));
    return { status: 200, text: () => text, close: () => aborter.abort() };
  };

  /** A line as an agent on `machineId` publishes it; `payload` overrides what the line claims. */
  const publish = (machineId: string, deployment: string, containerId: string, line: string, payload: Record<string, unknown> = {}) =>
    nc.publish(
      ns.subject(subjectFor(CONTAINER_LOG_LINE, machineId, ids[deployment], containerId)),
      JSON.stringify({
        containerId,
        deploymentId: ids[deployment],
        stream: 'stdout',
        line,
        sequence: 0,
        at: new Date().toISOString(),
        ...payload,
      }),
    );

  const place = async (containerId: string, deployment: string, machineId: string) => {
    await db.query(
      `INSERT INTO containers (id, deployment_version_id, machine_id, state, requested)
       SELECT $1, v.id, $3, 'running', '{}' FROM deployment_versions v WHERE v.deployment_id = $2`,
      [containerId, ids[deployment], machineId],
    );
  };

  beforeAll(async () => {
    schema = await createTestSchema('logs');
    ns = new Namespace(uniqueName('logs'));
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    call = client(base);
    gateway = new ServiceProcess(
      'gateway',
      testEnv(schema, ns.name, { HTTP_PORT: String(port), BOOTSTRAP_ADMIN_TOKEN: ADMIN, LOG_FOLLOWS_PER_TOKEN: String(CAP) }),
    ).start();
    await gateway.ready();
    nc = await connectTestNats();
    db = new pg.Client({ connectionString: schema.url, options: `-c search_path=${schema.schema}` });
    await db.connect();
    const uploaded = await fetch(`${base}/api/v1/code/${CODE}`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/gzip' },
      body: BUNDLE,
    });
    expect(uploaded.status).toBe(201);
    for (const name of ['alpha', 'beta']) {
      const deployed = await call('POST', '/api/v1/deployments', ADMIN, { name, kind: 'endpoint', handler: 'app.py:predict', code: CODE });
      expect(deployed.status).toBe(201);
      ids[name] = deployed.body.deploymentId;
    }
    await insertMachines(db, { id: 'm-1' }, { id: 'm-2' });
    await place('c-alpha', 'alpha', 'm-1');
    await place('c-beta', 'beta', 'm-2');
  });

  afterAll(async () => {
    await nc?.close();
    await db?.end();
    await gateway?.stop();
    await schema?.drop();
    await deleteNamespaces(ns.name);
  });

  it("sees only its deployment's lines, from the machine its container is placed on", async () => {
    const alpha = await follow('alpha');
    const beta = await follow('beta');
    try {
      publish('m-1', 'alpha', 'c-alpha', 'alpha says hi');
      publish('m-2', 'beta', 'c-beta', 'beta says hi');
      // m-2 claims alpha's container; a line whose payload contradicts its subject; a container alpha does not have.
      publish('m-2', 'alpha', 'c-alpha', 'forged by m-2');
      publish('m-1', 'alpha', 'c-alpha', 'payload names beta', { deploymentId: ids.beta });
      publish('m-1', 'alpha', 'c-stranger', 'not a container of alpha');
      // A container placed after the stream opened is picked up at once.
      await place('c-alpha-2', 'alpha', 'm-2');
      publish('m-2', 'alpha', 'c-alpha-2', 'alpha-2 on m-2');
      publish('m-1', 'alpha', 'c-alpha', 'alpha done');
      await waitFor('alpha done', async () => alpha.text().includes('alpha done') && alpha.text().includes('alpha-2 on m-2'));
      await waitFor('beta says hi', async () => beta.text().includes('beta says hi'));
      expect(alpha.text()).toContain('alpha says hi');
      expect(alpha.text()).not.toMatch(/beta says hi|forged by m-2|payload names beta|not a container of alpha/);
      expect(beta.text()).not.toMatch(/alpha/);
    } finally {
      alpha.close();
      beta.close();
    }
  });

  it('caps the follows one token holds at once: one over the cap gets 429 saying so, another token is not affected', async () => {
    const member = (await call('POST', '/api/v1/tokens', ADMIN, { name: 'watcher' })).body.token as string;
    const held = [await follow('alpha', member), await follow('beta', member)];
    expect(held.map((f) => f.status)).toEqual([200, 200]);
    const over = await follow('alpha', member);
    expect(over.status).toBe(429);
    expect(over.message).toBe(
      `this token already follows ${CAP} log streams, the most it may at once (LOG_FOLLOWS_PER_TOKEN=${CAP}): close one first`,
    );
    const other = await follow('alpha');
    expect(other.status).toBe(200);
    other.close();
    // Closing one gives its place back.
    held[0].close();
    const again = await waitFor('a place is free again', async () => {
      const f = await follow('alpha', member);
      return f.status === 200 ? f : undefined;
    });
    again.close();
    held[1].close();
  });
});
