/**
 * The floor of Tern's task design, for `main.ts`: the parts a durable Tern task must touch, used
 * directly in the bench's own process with nothing else on the path. A submit commits a row to
 * Postgres and publishes the task to a JetStream work queue (file storage, a message id) and waits
 * for its ack; a worker with `slots` tasks in flight pulls it, POSTs the payload to the same Python
 * runner over a kept-alive connection, commits the result to the row, acks the message and hands
 * the result to the waiting caller (a promise in the same process: no HTTP from the client, no
 * long poll, no second process, no lifecycle events, no metering or reputation). Each task
 * survives kill -9 of any process, as Tern's do: the row before the submit returns, the message
 * until the result is committed. Group commit and pipelining are left out on purpose: this is one
 * statement and one publish per step, what the parts cost as they come.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { Agent } from 'node:http';
import { AckPolicy, jetstream, jetstreamManager, RetentionPolicy, StorageType } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import pg from 'pg';
import { send } from '../invoke/stack.js';

export interface FloorOptions {
  natsUrl: string;
  databaseUrl: string;
  runnerPort: number;
  slots: number;
}

export interface FloorSystem {
  label: string;
  run(payload: { name: string }): Promise<unknown>;
  close(): Promise<void>;
}

export async function durableFloor(o: FloorOptions): Promise<FloorSystem> {
  const tag = `benchfloor${randomBytes(4).toString('hex')}`;
  const db = new pg.Pool({ connectionString: o.databaseUrl, max: o.slots * 2 });
  await db.query(`CREATE SCHEMA "${tag}"`);
  await db.query(`CREATE TABLE "${tag}".tasks (id uuid PRIMARY KEY, payload jsonb NOT NULL, state text NOT NULL, result jsonb)`);
  const nc = await connect({ servers: o.natsUrl, name: 'tern-bench-floor' });
  const jsm = await jetstreamManager(nc);
  const stream = tag.toUpperCase();
  const subject = `${tag}.tasks`;
  await jsm.streams.add({ name: stream, subjects: [subject], retention: RetentionPolicy.Workqueue, storage: StorageType.File });
  await jsm.consumers.add(stream, { durable_name: 'worker', ack_policy: AckPolicy.Explicit, max_ack_pending: o.slots });
  const js = jetstream(nc);
  const consumer = await js.consumers.get(stream, 'worker');
  const agent = new Agent({ keepAlive: true, maxSockets: o.slots });
  const waiters = new Map<string, (result: unknown) => void>();

  const runner = { url: `http://127.0.0.1:${o.runnerPort}/` };

  const messages = await consumer.consume({ max_messages: o.slots });
  const working = (async () => {
    for await (const m of messages) {
      const id = m.headers?.get('Nats-Msg-Id') ?? '';
      void send(agent, 'POST', runner, Buffer.from(m.data), 60_000)
        .then(async (answer) => {
          if (answer.status !== 200) throw new Error(`runner answered ${answer.status}`);
          await db.query(`UPDATE "${tag}".tasks SET state = 'COMPLETE', result = $2 WHERE id = $1`, [id, answer.body]);
          m.ack();
          waiters.get(id)?.(JSON.parse(answer.body) as unknown);
          waiters.delete(id);
        })
        .catch(() => m.nak(1000));
    }
  })();

  return {
    label: 'floor: pg + jetstream',
    async run(payload) {
      const id = randomUUID();
      const body = JSON.stringify(payload);
      const done = new Promise<unknown>((resolve) => waiters.set(id, resolve));
      await db.query(`INSERT INTO "${tag}".tasks (id, payload, state) VALUES ($1, $2, 'PENDING')`, [id, body]);
      await js.publish(subject, body, { msgID: id });
      return done;
    },
    async close() {
      await messages.close();
      await working;
      await jsm.streams.delete(stream).catch(() => undefined);
      await nc.close();
      await db.query(`DROP SCHEMA "${tag}" CASCADE`);
      await db.end();
      agent.destroy();
    },
  };
}
