import 'reflect-metadata';
import { Logger } from '@nestjs/common';
import type { NatsConnection } from '@nats-io/transport-node';
import { MACHINE_STATE_CHANGED, type MachineStateChanged, STREAMS } from '#tern/contracts';
import { connectNats, Messaging, Namespace } from '#tern/messaging';
import { DEFAULT_POOL, Machine, MachinesRepository } from '#tern/persistence';
import { MachineStateRelay } from '../../apps/scheduler/src/machines/machine-state-relay.js';
import { migratedDatabase } from '../support/database.js';
import { TEST_NATS, uniqueName } from '../support/isolation.js';
import { deleteNamespaces } from '../support/nats.js';

const quiet = new Logger('test');
quiet.log = quiet.warn = quiet.error = () => undefined;

const database = migratedDatabase('state-outbox');

/**
 * The scheduler's outbox of machine state changes on real Postgres and JetStream: a move committed
 * by a scheduler that died before announcing it is announced by the next one, in order, once.
 */
describe('machine state outbox', () => {
  let nc: NatsConnection;
  let messaging: Messaging;
  let machines: MachinesRepository;

  beforeAll(async () => {
    nc = await connectNats({ ...TEST_NATS, name: 'state-outbox-test' }, quiet);
    messaging = new Messaging(nc, new Namespace(uniqueName('outbox')));
    await messaging.ensureStream(STREAMS.EVENTS);
    machines = new MachinesRepository(database.db);
  });

  afterAll(async () => {
    await nc.close();
    await deleteNamespaces(messaging.ns.name);
  });

  /** What EVENTS holds for the machine, in stream order. */
  async function announced(machineId: string): Promise<{ msgId?: string; event: MachineStateChanged }[]> {
    const consumer = await messaging.js.consumers.get(messaging.ns.stream('EVENTS'), {
      filter_subjects: messaging.subject(MACHINE_STATE_CHANGED, [machineId]),
    });
    const found: { msgId?: string; event: MachineStateChanged }[] = [];
    for await (const m of await consumer.fetch({ max_messages: 100, expires: 1000 })) {
      found.push({ msgId: m.headers?.get('Nats-Msg-Id'), event: m.json<MachineStateChanged>() });
      if (m.info.pending === 0) break;
    }
    return found;
  }

  const outbox = async () => Number((await database.db.query(`SELECT count(*) AS n FROM machine_state_outbox`))[0].n);

  it('announces moves committed before their scheduler died, each machine in order, and only once', async () => {
    const machineId = uniqueName('m');
    await database.db.getRepository(Machine).save({ id: machineId, pool: DEFAULT_POOL, state: 'registered' });
    // A scheduler's transactions commit their moves, and it dies before any relay ran.
    await machines.transaction((tx) => tx.moveState(machineId, 'registered', 'ready', 'first heartbeat'));
    await database.db.query(`UPDATE machines SET last_heartbeat_at = now() - interval '1 hour' WHERE id = $1`, [machineId]);
    expect((await machines.markOfflineOlderThan(30)).map((m) => m.id)).toContain(machineId);
    await machines.moveState(machineId, 'offline', 'ready', 'heartbeats resumed');
    expect(await outbox()).toBe(3);
    expect(await announced(machineId)).toEqual([]);

    // The next scheduler's relay.
    const relay = new MachineStateRelay(machines, messaging);
    expect(await relay.run()).toBe(3);
    expect(await outbox()).toBe(0);
    const first = await announced(machineId);
    expect(first.map((a) => [a.event.from, a.event.to, a.event.reason])).toEqual([
      ['registered', 'ready', 'first heartbeat'],
      ['ready', 'offline', expect.stringMatching(/^no heartbeat for 30 s/)],
      ['offline', 'ready', 'heartbeats resumed'],
    ]);
    for (const a of first) expect(a.msgId).toBe(`${machineId}:${a.event.to}:${a.event.changedAt}`);

    // A relay killed after publishing and before its delete committed leaves the rows as they
    // were: the next relay publishes them again, and JetStream keeps one copy of each.
    await database.db.query(
      `INSERT INTO machine_state_outbox (machine_id, pool, from_state, to_state, reason, changed_at) VALUES ($1, $2, $3, $4, $5, $6), ($1, $2, $7, $8, $9, $10)`,
      [
        machineId,
        DEFAULT_POOL,
        first[0].event.from,
        first[0].event.to,
        first[0].event.reason,
        first[0].event.changedAt,
        first[2].event.from,
        first[2].event.to,
        first[2].event.reason,
        first[2].event.changedAt,
      ],
    );
    expect(await relay.run()).toBe(2);
    expect(await outbox()).toBe(0);
    expect((await announced(machineId)).map((a) => a.msgId)).toEqual(first.map((a) => a.msgId));
  });

  it('leaves the outbox to the relay holding it, so two replicas never interleave a machine’s moves', async () => {
    const machineId = uniqueName('m');
    await database.db.getRepository(Machine).save({ id: machineId, pool: DEFAULT_POOL, state: 'registered' });
    await machines.moveState(machineId, 'registered', 'ready', 'first heartbeat');
    const other = new MachineStateRelay(machines, messaging);
    await machines.transaction(async (tx) => {
      expect(await tx.claimStateOutbox(10)).toHaveLength(1);
      expect(await other.run()).toBe(0);
    });
    expect(await other.run()).toBe(1);
    expect((await announced(machineId)).map((a) => a.event.to)).toEqual(['ready']);
  });
});
