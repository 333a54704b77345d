import 'reflect-metadata';
import { Logger } from '@nestjs/common';
import { register } from 'prom-client';
import type { NatsConnection } from '@nats-io/transport-node';
import { MACHINE_BEAT, MACHINE_HEARTBEAT, type MachineHeartbeat, STREAMS, subjectFor } from '#tern/contracts';
import { connectNats, Messaging, Namespace, type RunningConsumer, startConsumer, startEventSubscription } from '#tern/messaging';
import { TEST_NATS, uniqueName } from '../support/isolation.js';
import { deleteNamespaces } from '../support/nats.js';
import { waitFor } from '../support/processes.js';

const quiet = new Logger('test');
quiet.log = quiet.warn = quiet.error = () => undefined;

function beat(machineId: string, sequence: number): MachineHeartbeat {
  return {
    machineId,
    pool: 'default',
    sentAt: new Date().toISOString(),
    sequence,
    cpuPercent: 12.5,
    memoryPercent: 40,
    gpus: [],
    runningContainers: [],
  };
}

/** A logger that keeps its warnings (object and text) and drops the rest. */
function warningLogger(): { logger: Logger; warnings: string[] } {
  const warnings: string[] = [];
  const logger = new Logger('consumer-test');
  logger.warn = (message: unknown, text?: unknown) => void warnings.push(`${JSON.stringify(message)} ${String(text ?? '')}`);
  logger.log = logger.error = () => undefined;
  return { logger, warnings };
}

describe('messaging over JetStream', () => {
  let nc: NatsConnection;
  let messaging: Messaging;
  let ns: Namespace;
  const consumers: RunningConsumer[] = [];

  beforeAll(async () => {
    ns = new Namespace(uniqueName('msg'));
    nc = await connectNats({ ...TEST_NATS, name: 'messaging-test' }, quiet);
    messaging = new Messaging(nc, ns);
    await messaging.ensureStream(STREAMS.HEARTBEATS);
  });

  afterEach(async () => {
    await Promise.all(consumers.splice(0).map((c) => c.stop()));
  });

  afterAll(async () => {
    await nc.close();
    await deleteNamespaces(ns.name);
  });

  it('declares streams idempotently, in its own namespace', async () => {
    await messaging.ensureStream(STREAMS.HEARTBEATS);
    await messaging.ensureStream(STREAMS.HEARTBEATS);
    const info = await (await messaging.jsm()).streams.info(ns.stream('HEARTBEATS'));
    expect(info.config.subjects).toEqual([`${ns.name}.heartbeat.>`]);
  });

  it('says what to set when NATS_REPLICAS asks for more copies than a single server keeps', async () => {
    const clustered = new Messaging(nc, new Namespace(uniqueName('msgr3')), '_INBOX', true, 3);
    await expect(clustered.ensureStream(STREAMS.HEARTBEATS)).rejects.toThrow(
      /NATS_REPLICAS=3 needs a JetStream cluster of at least 3 servers; use 1 on a single server/,
    );
  });

  it("declares nothing for a machine's agent: no stream, no consumer, no store, but opens what exists", async () => {
    const agent = new Messaging(nc, ns, '_INBOX', false);
    await expect(agent.ensureStream(STREAMS.EVENTS)).rejects.toThrow('declares nothing on NATS');
    await expect(
      agent.ensureConsumer({ stream: 'HEARTBEATS', durable: 'agent_made', filterSubject: MACHINE_HEARTBEAT.subject }),
    ).rejects.toThrow('declares nothing on NATS');
    await expect(agent.objectStore({ name: 'results' })).rejects.toThrow();
    await agent.kv({ name: 'routes' }); // bound, not created
    const streams: string[] = [];
    for await (const s of (await messaging.jsm()).streams.list()) if (s.config.name.includes(ns.name)) streams.push(s.config.name);
    expect(streams.filter((s) => /EVENTS|routes|results/.test(s))).toEqual([]);
    await messaging.objectStore({ name: 'results' });
    await expect(agent.objectStore({ name: 'results' })).resolves.toBeDefined();
  });

  it('stores a message once when it is published twice with the same Nats-Msg-Id', async () => {
    const first = await messaging.publish(MACHINE_HEARTBEAT, beat('dup', 1), { tokens: ['dup'], msgId: 'dup-1' });
    const second = await messaging.publish(MACHINE_HEARTBEAT, beat('dup', 1), { tokens: ['dup'], msgId: 'dup-1' });
    expect(first.duplicate).toBe(false);
    expect(second.duplicate).toBe(true);
    expect(second.seq).toBe(first.seq);
  });

  it('terminates an invalid payload with a logged reason and keeps handling valid ones', async () => {
    const { logger, warnings } = warningLogger();
    const handled: MachineHeartbeat[] = [];
    consumers.push(
      await startConsumer(
        messaging,
        {
          stream: 'HEARTBEATS',
          durable: 'invalid_test',
          filterSubject: subjectFor(MACHINE_HEARTBEAT, 'm-inv'),
          payload: MACHINE_HEARTBEAT.payload,
        },
        async (d) => {
          handled.push(d.payload);
        },
        logger,
      ),
    );
    const subject = messaging.subject(MACHINE_HEARTBEAT, ['m-inv']);
    nc.publish(subject, new TextEncoder().encode('{not json'));
    nc.publish(subject, new TextEncoder().encode(JSON.stringify({ ...beat('m-inv', 1), cpuPercent: 'lots', extra: 1 })));
    await messaging.publish(MACHINE_HEARTBEAT, beat('m-inv', 2), { tokens: ['m-inv'] });

    await waitFor('the valid heartbeat', async () => handled.length === 1);
    await waitFor('two warnings', async () => warnings.length >= 2);
    expect(handled[0].sequence).toBe(2);
    expect(warnings.join('\n')).toContain('body is not JSON');
    expect(warnings.join('\n')).toMatch(/cpuPercent: cpuPercent must not be greater than 100|cpuPercent must be a number/);
    expect(warnings.join('\n')).toContain('property extra should not exist');
    // Terminated, not left for redelivery: nothing pending, nothing redelivered.
    await waitFor('acks to settle', async () => {
      const i = await (await messaging.jsm()).consumers.info(ns.stream('HEARTBEATS'), 'invalid_test');
      return i.num_ack_pending === 0 && i.num_pending === 0 && i.num_redelivered === 0;
    });
  });

  /** tern_messages_machine_mismatch_total of this process for one contract subject. */
  const mismatches = async (subject: string) =>
    (await register.getSingleMetric('tern_messages_machine_mismatch_total')!.get()).values.find((v) => v.labels.subject === subject)
      ?.value ?? 0;

  it('terminates and counts a message whose payload names another machine than its subject', async () => {
    const { logger, warnings } = warningLogger();
    const handled: MachineHeartbeat[] = [];
    consumers.push(
      await startConsumer(
        messaging,
        {
          stream: 'HEARTBEATS',
          durable: 'foreign_test',
          filterSubject: MACHINE_HEARTBEAT.subject,
          payload: MACHINE_HEARTBEAT.payload,
          deliver: 'new',
        },
        async (d) => void handled.push(d.payload),
        logger,
      ),
    );
    const before = await mismatches(MACHINE_HEARTBEAT.subject);
    // m-liar publishes (its subject, which NATS permissions tie to it) a beat that claims to be m-victim's.
    await messaging.publish(MACHINE_HEARTBEAT, beat('m-victim', 1), { tokens: ['m-liar'] });
    await messaging.publish(MACHINE_HEARTBEAT, beat('m-honest', 1));

    await waitFor('the honest heartbeat', async () => handled.length === 1);
    await waitFor('the refusal counted', async () => (await mismatches(MACHINE_HEARTBEAT.subject)) === before + 1);
    expect(handled.map((b) => b.machineId)).toEqual(['m-honest']);
    expect(warnings.join('\n')).toContain('machineId "m-victim" differs from the machine "m-liar" of its subject tern.heartbeat.m-liar.v1');
    await waitFor('terminated, not redelivered', async () => {
      const i = await (await messaging.jsm()).consumers.info(ns.stream('HEARTBEATS'), 'foreign_test');
      return i.num_ack_pending === 0 && i.num_pending === 0 && i.num_redelivered === 0;
    });
  });

  it('redelivers after a handler error, and stops when the handler rejects', async () => {
    const attempts: Record<number, number> = {};
    consumers.push(
      await startConsumer(
        messaging,
        {
          stream: 'HEARTBEATS',
          durable: 'retry_test',
          filterSubject: subjectFor(MACHINE_HEARTBEAT, 'm-retry'),
          payload: MACHINE_HEARTBEAT.payload,
        },
        async (d) => {
          const n = (attempts[d.payload.sequence] = (attempts[d.payload.sequence] ?? 0) + 1);
          expect(d.deliveryCount).toBe(n);
          if (d.payload.sequence === 1 && n < 2) throw new Error('transient');
          if (d.payload.sequence === 2) d.reject('not for us');
        },
        quiet,
      ),
    );
    await messaging.publish(MACHINE_HEARTBEAT, beat('m-retry', 1), { tokens: ['m-retry'] });
    await messaging.publish(MACHINE_HEARTBEAT, beat('m-retry', 2), { tokens: ['m-retry'] });
    await waitFor('the retried message', async () => attempts[1] === 2, 10_000);
    await new Promise((r) => setTimeout(r, 1500));
    expect(attempts).toEqual({ 1: 2, 2: 1 });
  });

  it('survives a consumer restart: a durable resumes where it stopped', async () => {
    const seen: number[] = [];
    const opts = {
      stream: 'HEARTBEATS' as const,
      durable: 'resume_test',
      filterSubject: subjectFor(MACHINE_HEARTBEAT, 'm-res'),
      payload: MACHINE_HEARTBEAT.payload,
    };
    const first = await startConsumer(messaging, opts, async (d) => void seen.push(d.payload.sequence), quiet);
    await messaging.publish(MACHINE_HEARTBEAT, beat('m-res', 1), { tokens: ['m-res'] });
    await waitFor('first', async () => seen.length === 1);
    await first.stop();
    await messaging.publish(MACHINE_HEARTBEAT, beat('m-res', 2), { tokens: ['m-res'] });
    consumers.push(await startConsumer(messaging, opts, async (d) => void seen.push(d.payload.sequence), quiet));
    await waitFor('second', async () => seen.length === 2);
    expect(seen).toEqual([1, 2]);
  });

  it('listens on core NATS: every subscriber hears each valid message, invalid ones and ones naming another machine are dropped', async () => {
    const before = await mismatches(MACHINE_HEARTBEAT.subject);
    const heard: string[][] = [[], []];
    const subs = heard.map((list) => messaging.listen(MACHINE_HEARTBEAT, (beat) => void list.push(beat.machineId)));
    try {
      await nc.flush();
      messaging.emit(MACHINE_HEARTBEAT, beat('m-listen', 1), ['m-listen']);
      nc.publish(messaging.subject(MACHINE_HEARTBEAT, ['m-bad']), new TextEncoder().encode('{"machineId": 7}'));
      messaging.emit(MACHINE_HEARTBEAT, beat('m-victim', 1), ['m-liar']);
      messaging.emit(MACHINE_HEARTBEAT, beat('m-listen-2', 1), ['m-listen-2']);
      await waitFor('both subscribers heard both valid messages', async () => heard.every((l) => l.length === 2), 5_000);
      await new Promise((r) => setTimeout(r, 200));
      expect(heard).toEqual([
        ['m-listen', 'm-listen-2'],
        ['m-listen', 'm-listen-2'],
      ]);
      expect(await mismatches(MACHINE_HEARTBEAT.subject)).toBe(before + 2);
    } finally {
      for (const s of subs) s.unsubscribe();
    }
  });

  it('hears core NATS events in a queue group: each valid one by one member, invalid, foreign and past the limit dropped', async () => {
    const before = await mismatches(MACHINE_BEAT.subject);
    const handled: string[][] = [[], []];
    const members = await Promise.all(
      handled.map((list) =>
        startEventSubscription(
          messaging,
          MACHINE_BEAT,
          'beat-test',
          async (b, subject, receivedAt) => {
            expect(subject).toBe(`tern.beat.${b.machineId}.v1`);
            expect(Math.abs(Date.now() - receivedAt)).toBeLessThan(5000);
            list.push(b.machineId);
          },
          { logger: quiet },
        ),
      ),
    );
    // A member whose handlers never return (a stalled database), in a group of its own.
    let release!: () => void;
    const stalled = new Promise<void>((r) => (release = r));
    let taken = 0;
    const stuck = await startEventSubscription(
      messaging,
      MACHINE_BEAT,
      'beat-stuck',
      async () => {
        taken++;
        await stalled;
      },
      { maxInFlight: 5, logger: quiet },
    );
    const dropped = async () =>
      (await register.getSingleMetric('tern_events_handled_total')!.get()).values.find(
        (v) => v.labels.subject === MACHINE_BEAT.subject && v.labels.outcome === 'dropped',
      )?.value ?? 0;
    try {
      expect(stuck.hearing.since).toBeLessThanOrEqual(Date.now());
      expect(stuck.hearing.live).toBe(true);
      const droppedBefore = await dropped();
      for (let i = 0; i < 40; i++) messaging.emit(MACHINE_BEAT, beat(`m-q${i}`, 1), [`m-q${i}`]);
      nc.publish(messaging.subject(MACHINE_BEAT, ['m-bad']), new TextEncoder().encode('{"machineId": 7}'));
      messaging.emit(MACHINE_BEAT, beat('m-victim', 1), ['m-liar']);
      await waitFor('every valid beat handled', async () => handled.flat().length === 40, 5_000);
      await waitFor('the refusal counted', async () => (await mismatches(MACHINE_BEAT.subject)) >= before + 1);
      await new Promise((r) => setTimeout(r, 200));
      // Once each in the group, shared by its members.
      expect(new Set(handled.flat()).size).toBe(40);
      expect(handled.flat()).toHaveLength(40);
      expect(handled.every((l) => l.length > 0)).toBe(true);
      // The stalled member took five and dropped the other 37 messages (the invalid and the foreign among them), queuing none.
      expect(taken).toBe(5);
      expect((await dropped()) - droppedBefore).toBe(37);
    } finally {
      release();
      await Promise.all([...members, stuck].map((m) => m.stop()));
    }
  });
});
