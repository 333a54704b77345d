import pg from 'pg';
import type { NatsConnection, Subscription } from '@nats-io/transport-node';
import { REPUTATION_SCORE, type ReputationScoreChanged } from '#tern/contracts';
import { connectNats, LEASE_RENEW_MS, LEASE_TTL_MS, Messaging, Namespace } from '#tern/messaging';
import { DEFAULT_PARAMS, neutral } from '#tern/reputation';
import { createTestSchema, TEST_NATS, type TestSchema, testEnv, uniqueName } from '../support/isolation.js';
import { deleteNamespaces } from '../support/nats.js';
import { freePort, ServiceProcess, waitFor } from '../support/processes.js';
import { insertMachines } from '../support/rows.js';
import { ADMIN, client, tern } from '../machines/harness.js';
import { MachineEvents, reputationEntry } from './events.js';

/**
 * The reputation service as a real process fed real events: two machines run the same
 * deployment, one fails half its tasks; its score must end lower, survive a kill, and keep
 * counting events that arrived while it was down exactly once.
 */
describe('reputation service', () => {
  let schema: TestSchema;
  let ns: Namespace;
  let service: ServiceProcess;
  let nc: NatsConnection;
  let messaging: Messaging;
  let db: pg.Client;
  let events: MachineEvents;
  let scoresSub: Subscription;
  const published: ReputationScoreChanged[] = [];

  let httpPort: number;
  const start = async () => {
    httpPort = await freePort();
    service = new ServiceProcess(
      'reputation',
      // Beats every second, so the test below can let a few go unheard.
      testEnv(schema, ns.name, {
        HTTP_PORT: String(httpPort),
        REPUTATION_RECOMPUTE_INTERVAL_MS: '300',
        MACHINE_HEARTBEAT_INTERVAL_SECONDS: '1',
      }),
    ).start();
    await service.ready();
  };
  const record = async (machineId: string) =>
    (await db.query(`SELECT record FROM reputation_machines WHERE machine_id = $1`, [machineId])).rows[0]?.record;

  beforeAll(async () => {
    schema = await createTestSchema('rep');
    ns = new Namespace(uniqueName('rep'));
    await start();
    nc = await connectNats({ ...TEST_NATS, name: 'reputation-test' });
    messaging = new Messaging(nc, ns);
    scoresSub = nc.subscribe(messaging.subject(REPUTATION_SCORE), {
      callback: (err, m) => {
        if (!err) published.push(JSON.parse(new TextDecoder().decode(m.data)) as ReputationScoreChanged);
      },
    });
    db = new pg.Client({ connectionString: schema.url, options: `-c search_path=${schema.schema}` });
    await db.connect();
    events = new MachineEvents(messaging);
  });

  afterAll(async () => {
    scoresSub?.unsubscribe();
    await service?.stop();
    await db?.end();
    await nc?.close();
    await schema?.drop();
    await deleteNamespaces(ns.name);
  });

  it("scores the machine that fails half of a deployment's tasks below the one where it succeeds", async () => {
    const joined = new Date(Date.now() - 3600_000);
    await events.joined('m-good', 'default', joined);
    await events.joined('m-bad', 'default', joined);
    // A deployment whose handler fails everywhere alike: no machine's fault.
    const [flakyGood, flakyBad] = await events.containersReady([
      ['m-good', 'dep-flaky'],
      ['m-bad', 'dep-flaky'],
    ]);
    await events.tasks('m-good', 'dep-flaky', flakyGood, 10, 2);
    await events.tasks('m-bad', 'dep-flaky', flakyBad, 10, 2);
    // A deployment that succeeds on m-good and fails every other task on m-bad.
    const [good, bad] = await events.containersReady([
      ['m-good', 'dep-model'],
      ['m-bad', 'dep-model'],
    ]);
    await events.tasks('m-good', 'dep-model', good, 20, 0);
    await events.tasks('m-bad', 'dep-model', bad, 20, 2);

    const [g, b] = await waitFor('both machines scored with all 60 task outcomes', async () => {
      const [rg, rb] = [await record('m-good'), await record('m-bad')];
      const attempts = (r: any) => Object.values(r?.tasks ?? {}).reduce((n: number, t: any) => n + t.attempts.v, 0);
      if (Math.round(attempts(rg)) !== 30 || Math.round(attempts(rb)) !== 30) return undefined;
      // A pass after the last event: scores with all thirty tasks and two starts (not a fixed wait,
      // which a loaded machine outlasted with a pass that had seen 21 of them).
      const [eg, eb] = [await reputationEntry(messaging, 'm-good'), await reputationEntry(messaging, 'm-bad')];
      return eg && eb && [eg, eb].every((e) => Math.round(e.observed) === 32) ? [eg, eb] : undefined;
    });
    expect(b.score).toBeLessThan(g.score - 0.03);
    expect(b.components.taskSuccess).toBeLessThan(0.8);
    expect(g.components.taskSuccess).toBeGreaterThan(0.9);
    // Everything else is alike: uptime, starts. The agents' own network tests (900 Mbps) score nothing.
    for (const c of ['uptime', 'startSuccess', 'startLatency'] as const) expect(b.components[c]).toBeCloseTo(g.components[c], 2);
    expect(g.components.network).toBeUndefined();
    // Thirty tasks and two starts seen by the control plane: both proven.
    expect([g.standing, b.standing]).toEqual(['proven', 'proven']);
    expect(g.observed).toBeCloseTo(32, 0);
    expect(g.score).toBeGreaterThan(0);
    expect(g.score).toBeLessThan(1);

    // History rows and REPUTATION_SCORE events carry the same numbers.
    const rows = (await db.query(`SELECT machine_id, score FROM reputation_scores ORDER BY computed_at DESC`)).rows;
    expect(Number(rows.find((r) => r.machine_id === 'm-bad').score)).toBe(b.score);
    await waitFor('the score events', async () => published.some((p) => p.machineId === 'm-bad' && p.score === b.score));
    const metrics = await (await fetch(`http://127.0.0.1:${httpPort}/metrics`)).text();
    // The gauge follows every pass; the entry, the history and the events only a move of 0.005 or more.
    const gauge = Number(new RegExp(`^tern_reputation_score\\{machine="m-bad"[^}]*\\} (\\S+)$`, 'm').exec(metrics)?.[1]);
    expect(Math.abs(gauge - b.score)).toBeLessThan(0.005);
  });

  it('counts downtime against uptime and skipped heartbeats against punctuality', async () => {
    const hour = 3600_000;
    const now = Date.now();
    await events.joined('m-flaky', 'default', new Date(now - hour));
    await events.stateChanged('m-flaky', 'default', 'offline', new Date(now - hour / 2));
    await events.stateChanged('m-flaky', 'default', 'ready', new Date(now - hour / 4));
    for (const sequence of [1, 2, 5, 6, 7]) await events.heartbeat('m-flaky', 'default', sequence);
    // Down 15 of the 60 minutes since it joined; 5 of 7 expected beats came. The events travel on
    // several subjects, so a pass may score some before the others (offline but not yet ready
    // again: uptime 0.5): wait for the score of all of them, and fail if it never comes.
    const { alpha, beta } = DEFAULT_PARAMS.prior;
    const punctuality = (5 + alpha) / (7 + alpha + beta);
    const e = await waitFor('the flaky machine scored with every event', async () => {
      const entry = await reputationEntry(messaging, 'm-flaky');
      const c = entry?.components;
      return c && Math.abs(c.uptime1d - 0.75) < 0.02 && Math.abs(c.heartbeat - punctuality) < 0.02 ? entry : undefined;
    });
    expect(e.components.uptime1d).toBeCloseTo(0.75, 2);
    expect(e.components.uptime30d).toBeCloseTo(0.75, 2);
    expect(e.components.heartbeat).toBeCloseTo(punctuality, 2);
    expect(e.components.heartbeat).toBeLessThan(neutral(DEFAULT_PARAMS));
  });

  it('shows in the machines API and the CLI, with components and history', async () => {
    const port = await freePort();
    const gateway = new ServiceProcess(
      'gateway',
      testEnv(schema, ns.name, { HTTP_PORT: String(port), BOOTSTRAP_ADMIN_TOKEN: ADMIN }),
    ).start();
    try {
      await gateway.ready();
      const base = `http://127.0.0.1:${port}`;
      const call = client(base);
      await insertMachines(db, { id: 'm-good' }, { id: 'm-bad' }, { id: 'm-new', state: 'registered' });
      const current = (await reputationEntry(messaging, 'm-bad'))!;

      const list = await call('GET', '/api/v1/machines', ADMIN);
      expect(list.status).toBe(200);
      const byId = new Map(list.body.map((m: any) => [m.id, m.reputation]));
      expect(byId.get('m-bad')).toEqual(current);
      expect(byId.get('m-new')).toBeNull();
      expect((await call('GET', '/api/v1/machines/m-bad', ADMIN)).body.reputation).toEqual(current);

      const rep = await call('GET', '/api/v1/machines/m-bad/reputation?limit=2', ADMIN);
      expect(rep.status).toBe(200);
      expect(rep.body).toMatchObject({
        machineId: 'm-bad',
        score: current.score,
        components: current.components,
        computedAt: current.computedAt,
      });
      expect(rep.body.history.length).toBeGreaterThanOrEqual(1);
      expect(rep.body.history.length).toBeLessThanOrEqual(2);
      expect(rep.body.history[0].score).toBe(current.score);
      const future = await call('GET', `/api/v1/machines/m-bad/reputation?from=${new Date(Date.now() + 60_000).toISOString()}`, ADMIN);
      expect(future.body.history).toEqual([]);
      expect((await call('GET', '/api/v1/machines/m-new/reputation', ADMIN)).body).toEqual({
        machineId: 'm-new',
        score: null,
        components: null,
        observed: null,
        standing: null,
        computedAt: null,
        history: [],
      });
      expect((await call('GET', '/api/v1/machines/nope/reputation', ADMIN)).status).toBe(404);
      const bad = await call('GET', '/api/v1/machines/m-bad/reputation?limit=0&from=yesterday', ADMIN);
      expect(bad.status).toBe(400);
      expect(bad.body.message).toEqual(
        expect.arrayContaining(['limit must be a whole number from 1 to 1000', 'from must be an ISO 8601 date, e.g. 2026-01-01T00:00:00Z']),
      );

      const listed = await tern(['machine', 'list'], base, ADMIN);
      expect(listed.stdout).toMatch(/REPUTATION/);
      expect(listed.stdout).toMatch(new RegExp(`^m-bad .* ${current.score.toFixed(2)} `, 'm'));
      const shown = await tern(['machine', 'show', 'm-bad'], base, ADMIN);
      expect(shown.stdout).toMatch(
        new RegExp(`^Reputation\\s+${current.score.toFixed(2)}, proven \\(\\d+ starts and tasks observed\\) \\(computed`, 'm'),
      );
      expect(shown.stdout).toMatch(/^\s+network\s+not measured by the control plane \(counts nothing\)$/m);
      expect(shown.stdout).toMatch(new RegExp(`^\\s+task success\\s+${current.components.taskSuccess.toFixed(2)}$`, 'm'));
      const history = await tern(['machine', 'reputation', 'm-bad', '--limit', '1'], base, ADMIN);
      expect(history.stdout).toMatch(/^COMPUTED\s+SCORE/m);
    } finally {
      await gateway.stop();
    }
  });

  it('resumes after a kill and counts the events it missed once', async () => {
    const before = (await reputationEntry(messaging, 'm-bad'))!;
    await service.kill('SIGKILL');
    const bad = await events.containerReady('m-bad', 'dep-model');
    await events.tasks('m-bad', 'dep-model', bad, 10, 1); // all fail
    await start();
    const after = await waitFor('the missed failures counted', async () => {
      const e = await reputationEntry(messaging, 'm-bad');
      return e && e.score < before.score - 0.01 ? e : undefined;
    });
    expect(after.components.taskSuccess).toBeLessThan(before.components.taskSuccess);
    // The ready may be seen before its start command is stored (they travel on separate consumers): it is asked again.
    const r = await waitFor('the missed start counted', async () => {
      const stored = await record('m-bad');
      return Math.round(stored.starts['dep-model'].attempts.v) === 2 ? stored : undefined;
    });
    expect(Math.round(r.tasks['dep-model'].attempts.v)).toBe(30);
    expect(Math.round(r.tasks['dep-model'].shared.v)).toBe(20);
    expect(Math.round(r.starts['dep-model'].attempts.v)).toBe(2);
  });

  it("does not hold its own downtime against a machine's beats, lost on core NATS while nobody listened", async () => {
    const stored = async () =>
      (await db.query(`SELECT heartbeats FROM reputation_machines WHERE machine_id = 'm-steady'`)).rows[0]?.heartbeats as
        { expected: { v: number }; onTime: { v: number }; lastSequence: number } | undefined;
    let sequence = 0;
    // The agent beats every second (MACHINE_HEARTBEAT_INTERVAL_SECONDS of start()) whoever listens.
    const ticker = setInterval(() => void events.heartbeat('m-steady', 'default', ++sequence).catch(() => undefined), 1000);
    let lost: number;
    try {
      await waitFor('the first beats stored', async () => ((await stored())?.lastSequence ?? 0) >= 3);
      await service.kill('SIGKILL');
      const killedAt = sequence;
      await new Promise((r) => setTimeout(r, 5000));
      await start();
      lost = sequence - killedAt; // at least: those sent while it was down
      const target = sequence + 3;
      await waitFor('beats stored again', async () => ((await stored())?.lastSequence ?? 0) >= target, 30_000);
    } finally {
      clearInterval(ticker);
    }
    const h = (await stored())!;
    console.log(
      `beats ${h.lastSequence} sent, at least ${lost} of them while reputation was down; expected ${h.expected.v}, on time ${h.onTime.v}`,
    );
    expect(lost).toBeGreaterThanOrEqual(5);
    // Every beat it heard came on time, and those sent while it was down are not counted as skipped
    // (counted, they would be `lost` beats expected that never came). One at the span's edge may be.
    expect(h.expected.v - h.onTime.v).toBeLessThan(1.5);
    expect(h.expected.v).toBeLessThan(h.lastSequence - lost + 1.5);
  }, 90_000);

  it('shares the events between two replicas, counting each once, and hands scoring over after a kill -9', async () => {
    const port = await freePort();
    const second = new ServiceProcess(
      'reputation',
      testEnv(schema, ns.name, { HTTP_PORT: String(port), REPUTATION_RECOMPUTE_INTERVAL_MS: '300' }),
    ).start();
    try {
      await second.ready();
      await events.joined('m-pair', 'default', new Date(Date.now() - 3600_000));
      const pair = await events.containerReady('m-pair', 'dep-pair');
      await events.tasks('m-pair', 'dep-pair', pair, 200, 4);
      for (let sequence = 1; sequence <= 30; sequence++) await events.heartbeat('m-pair', 'default', sequence);
      const stored = await waitFor('every task of the pair counted', async () => {
        const r = await record('m-pair');
        return r && Math.round(r.tasks['dep-pair']?.attempts.v ?? 0) >= 200 ? r : undefined;
      });
      await new Promise((r) => setTimeout(r, 1000)); // a double count would land meanwhile
      const r = await record('m-pair');
      expect(Math.round(r.tasks['dep-pair'].attempts.v)).toBe(200);
      expect(Math.round(r.starts['dep-pair'].attempts.v)).toBe(1);
      expect(stored.heartbeats).toBeUndefined(); // kept in a column of their own
      // Heartbeats travel on their own consumer, and come last.
      await waitFor('the last beat stored', async () => {
        const { rows } = await db.query(`SELECT heartbeats FROM reputation_machines WHERE machine_id = 'm-pair'`);
        return rows[0]?.heartbeats?.lastSequence === 30;
      });
      // Both replicas handled some of them: the consumers are shared, not each replica's own.
      const handled = async (p: number) => {
        const text = await (await fetch(`http://127.0.0.1:${p}/metrics`)).text();
        return Number(
          /^tern_messages_settled_total\{[^}]*subject="TaskAttemptEnded"[^}]*outcome="ack"[^}]*\} (\S+)$/m.exec(text)?.[1] ?? 0,
        );
      };
      const [first, other] = [await handled(httpPort), await handled(port)];
      console.log(`task outcomes handled: ${first} by one replica, ${other} by the other`);
      expect(first).toBeGreaterThan(0);
      expect(other).toBeGreaterThan(0);

      // Scoring: one lease holder; after its kill -9 the other scores within the lease's TTL and a renewal.
      const leading = (p: ServiceProcess) => p.lines.some((l) => /leading: this replica scores/.test(l));
      const [leader, follower] = leading(service) ? [service, second] : [second, service];
      expect(leading(follower)).toBe(false);
      const killedAt = Date.now();
      await leader.kill('SIGKILL');
      await follower.waitForLog(/leading: this replica scores/, LEASE_TTL_MS + LEASE_RENEW_MS + 2000);
      const takeoverMs = Date.now() - killedAt;
      console.log(`reputation scoring taken over ${takeoverMs} ms after a kill -9 of the lease holder`);
      // A machine that joins now is scored by the survivor alone. Events the dead replica had
      // pulled but not acknowledged come back after their ack wait (30 s).
      expect(await reputationEntry(messaging, 'm-after')).toBeUndefined();
      await events.joined('m-after', 'default', new Date());
      await waitFor('the survivor scores a machine that joined after the kill', () => reputationEntry(messaging, 'm-after'), 45_000);
    } finally {
      await second.stop();
      if (!service.running) await start();
    }
  }, 150_000);
});
