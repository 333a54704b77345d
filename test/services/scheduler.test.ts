import pg from 'pg';
import type { NatsConnection } from '@nats-io/transport-node';
import { MACHINE_HEARTBEAT, STREAMS } from '#tern/contracts';
import { connectNats, Messaging, Namespace } from '#tern/messaging';
import { createTestSchema, TEST_NATS, type TestSchema, testEnv, uniqueName } from '../support/isolation.js';
import { deleteNamespaces } from '../support/nats.js';
import { freePort, ServiceProcess, waitFor } from '../support/processes.js';
import { insertMachines } from '../support/rows.js';

/** The scheduler as a real process: it must reject bad messages with a logged reason and keep serving. */
describe('scheduler service', () => {
  let schema: TestSchema;
  let ns: Namespace;
  let scheduler: ServiceProcess;
  let nc: NatsConnection;
  let messaging: Messaging;
  let db: pg.Client;

  beforeAll(async () => {
    schema = await createTestSchema('sched');
    ns = new Namespace(uniqueName('sched'));
    scheduler = new ServiceProcess('scheduler', testEnv(schema, ns.name, { HTTP_PORT: String(await freePort()) })).start();
    await scheduler.ready();
    nc = await connectNats({ ...TEST_NATS, name: 'scheduler-test' });
    messaging = new Messaging(nc, ns);
    db = new pg.Client({ connectionString: schema.url, options: `-c search_path=${schema.schema}` });
    await db.connect();
    await insertMachines(db, { id: 'm1' }, { id: 'm2' });
  });

  afterAll(async () => {
    await scheduler?.stop();
    await db?.end();
    await nc?.close();
    await schema?.drop();
    await deleteNamespaces(ns.name);
  });

  it('declares the streams it owns', async () => {
    const jsm = await messaging.jsm();
    for (const name of ['EVENTS', 'COMMANDS', 'HEARTBEATS'] as const) {
      const info = await jsm.streams.info(ns.stream(name));
      expect(info.config.subjects).toEqual(STREAMS[name].subjects.map((s) => ns.subject(s)));
    }
  });

  it('terminates a malformed heartbeat with a logged reason and goes on serving other machines', async () => {
    const bad = messaging.subject(MACHINE_HEARTBEAT, ['m1']);
    await messaging.js.publish(bad, new TextEncoder().encode(JSON.stringify({ machineId: 'm1', cpuPercent: 900 })));
    await messaging.js.publish(bad, new TextEncoder().encode('garbage'));
    const sentAt = new Date().toISOString();
    await messaging.publish(
      MACHINE_HEARTBEAT,
      { machineId: 'm2', pool: 'default', sentAt, sequence: 1, cpuPercent: 5, memoryPercent: 10, gpus: [], runningContainers: [] },
      { tokens: ['m2'] },
    );

    // Either bad message may be settled first: wait for the one about the invalid object.
    const rejected = await scheduler.waitForLog((r) => /terminated message/.test(String(r.msg)) && /cpuPercent/.test(String(r.reason)));
    expect(String(rejected.reason)).toMatch(/cpuPercent must not be greater than 100/);
    expect(String(rejected.reason)).toMatch(/pool must be a string/);
    await scheduler.waitForLog((r) => /terminated message/.test(String(r.msg)) && /not JSON/.test(String(r.reason)));

    const row = await waitFor('m2 heartbeat recorded', async () => {
      const { rows } = await db.query(`SELECT last_heartbeat_at FROM machines WHERE id = 'm2'`);
      return rows[0]?.last_heartbeat_at ? rows[0] : undefined;
    });
    // Recorded by the database's clock, not the agent's, so a skewed agent clock cannot make it look silent.
    expect(Math.abs(new Date(row.last_heartbeat_at).getTime() - Date.parse(sentAt))).toBeLessThan(5000);
    const { rows } = await db.query(`SELECT last_heartbeat_at FROM machines WHERE id = 'm1'`);
    expect(rows[0].last_heartbeat_at).toBeNull();
    expect(scheduler.running).toBe(true);
  });

  it('exits with a clear message when its configuration is invalid', async () => {
    const broken = new ServiceProcess('scheduler', testEnv(schema, ns.name, { HTTP_PORT: 'eighty' })).start();
    const code = await waitFor('exit', async () => (broken.running ? undefined : { code: await broken.kill() }));
    expect(code.code).toBe(78);
    expect(broken.lines.join('\n')).toContain('HTTP_PORT="eighty": must be a whole number');
  });
});
