import { randomBytes } from 'node:crypto';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { type KV, Kvm } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/transport-node';
import {
  AUTOSCALER_LEADER_BUCKET,
  REPUTATION_LEADER_BUCKET,
  TASK_ATTEMPT_ENDED,
  TASK_ATTEMPTS_ENDED,
  type TaskAttemptEnded,
  type TaskAttemptsEnded,
} from '#tern/contracts';
import { LEASE_KEY, LEASE_RENEW_MS, LEASE_TTL_MS, Messaging, Namespace } from '#tern/messaging';
import { startPostgres, stopPostgres } from '../../scripts/lib/postgres.mjs';
import { NatsCluster } from '../support/nats-cluster.js';
import { freePort, ServiceProcess, waitFor } from '../support/processes.js';
import { everyStep, startStack, type Stack } from '../support/stack.js';

const EXAMPLES = fileURLToPath(new URL('../../examples', import.meta.url));
const CONTROL_PLANE = ['gateway', 'scheduler', 'autoscaler', 'metering', 'reputation'] as const;
type Service = (typeof CONTROL_PLANE)[number];
const TASKS = 1000;
/**
 * docs/operations.md, *Faults held*: a lease passes within LEASE_TTL_MS + LEASE_RENEW_MS, plus a
 * stream leader election when the killed NATS server also led the lease's KV bucket; a surviving
 * replica's /health/ready is out at most TAKEOVER_MS before Postgres stops and after it is back.
 */
const TAKEOVER_MS = LEASE_TTL_MS + LEASE_RENEW_MS;
/**
 * What the test adds to each bound for timers firing late on a loaded 2-core machine (every
 * service twice, three NATS servers, Postgres and an agent at once): 5.8 s was measured against
 * the 6 s bound at load 16.
 */
const TIMER_SLACK_MS = 2000;
/** The most a stream of the cluster takes to elect a new leader after a kill -9 of its leader (architecture.md: 3.7 to 7.6 s measured). */
const NATS_ELECTION_MS = 8000;
/** How long Postgres stays down. */
const POSTGRES_DOWN_MS = 4000;

/** The environment a running process was started with (to start a second replica exactly like it). */
function environOf(pid: number): Record<string, string> {
  return Object.fromEntries(
    readFileSync(`/proc/${pid}/environ`, 'utf8')
      .split('\0')
      .filter(Boolean)
      .map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]),
  );
}

/** A time /health/ready did not answer 200: from the last 200 before it to the first after it. */
interface Gap {
  start: number;
  end: number;
}

/** Polls a replica's /health/ready every 200 ms and keeps the times it was not answering 200. */
class ReadinessWatch {
  private lastOk = Date.now();
  private failing = false;
  readonly gaps: Gap[] = [];
  private readonly timer: NodeJS.Timeout;
  private busy = false;

  constructor(
    readonly name: string,
    private readonly url: string,
  ) {
    this.timer = setInterval(() => {
      this.sample().catch(() => undefined);
    }, 200);
  }

  private async sample() {
    if (this.busy) return;
    this.busy = true;
    const ok = await fetch(`${this.url}/health/ready`, { signal: AbortSignal.timeout(2000) }).then(
      (r) => r.ok,
      () => false,
    );
    this.busy = false;
    const now = Date.now();
    if (ok) {
      if (this.failing) this.gaps.push({ start: this.lastOk, end: now });
      this.failing = false;
      this.lastOk = now;
    } else this.failing = true;
  }

  /** Stops polling; a gap still open counts up to now. */
  stop(): Gap[] {
    clearInterval(this.timer);
    if (this.failing) this.gaps.push({ start: this.lastOk, end: Date.now() });
    return this.gaps;
  }
}

/**
 * Reads a lease's key every 200 ms from the moment of the kills: who held it then, and the first
 * other holder written after (its time the server's). Whichever replica takes the lease counts,
 * the survivor or the killed one that `up` restarted a second later: they race for it.
 */
class LeaseWatch {
  private holder?: string;
  private takenOver?: { by: string; at: number };
  private readonly timer: NodeJS.Timeout;
  private busy = false;

  private constructor(
    readonly name: string,
    private readonly kv: KV,
    held: string | undefined,
  ) {
    this.holder = held;
    this.timer = setInterval(() => {
      this.sample().catch(() => undefined);
    }, 200).unref(); // a failed assertion before stop() must not keep jest from exiting
  }

  static async start(name: string, kv: KV): Promise<LeaseWatch> {
    return new LeaseWatch(name, kv, (await kv.get(LEASE_KEY))?.string());
  }

  private async sample() {
    if (this.busy || this.takenOver) return;
    this.busy = true;
    try {
      const e = await this.kv.get(LEASE_KEY);
      const by = e?.string();
      if (e && by && this.holder !== undefined && by !== this.holder) this.takenOver = { by, at: e.created.getTime() };
      else if (this.holder === undefined && by) this.holder = by;
    } finally {
      this.busy = false;
    }
  }

  /** Stops reading: who holds the lease at the end, and when it passed (undefined: it never left the holder of the kill). */
  async stop(): Promise<{ holder?: string; takenOver?: { by: string; at: number } }> {
    clearInterval(this.timer);
    const now = (await this.kv.get(LEASE_KEY).catch(() => null))?.string();
    return { holder: now, takenOver: this.takenOver };
  }
}

/**
 * How much of a gap lies before and after the time Postgres was down (all of it, for a gap
 * outside it): what the takeover time bounds, Postgres's own downtime being the operator's.
 */
function beyondPostgres(gap: Gap, pg: Gap): { before: number; after: number } {
  if (gap.end <= pg.start || gap.start >= pg.end) return { before: gap.end - gap.start, after: 0 };
  return { before: Math.max(0, pg.start - gap.start), after: Math.max(0, gap.end - pg.end) };
}

/**
 * Issue 19's faults, held: a run of 1,000 tasks on two replicas of every control-plane service
 * over a 3-node NATS cluster and a private Postgres. Mid-run, kill -9 the NATS server leading
 * TASKS and one replica of each service, then stop Postgres and start it again: every accepted
 * task is COMPLETE once, metering's task usage equals a replay of the task events, callers got
 * 503 (not 500, not a hang) while Postgres was down, and the surviving replicas' readiness
 * came back within the documented takeover time.
 */
describe('faults held: two replicas of every service, a 3-node NATS cluster, a Postgres restart', () => {
  let cluster: NatsCluster;
  let stack: Stack;
  let db: pg.Client | undefined;
  let nc: NatsConnection;
  const pgDir = mkdtempSync(join(tmpdir(), 'tern-faults-pg-'));
  const postgres = { port: 0, password: randomBytes(12).toString('hex') };
  const replicas: ServiceProcess[] = [];
  let watches: ReadinessWatch[] = [];
  const startPg = () =>
    startPostgres({ dir: pgDir, port: postgres.port, database: 'tern', password: postgres.password, logLink: undefined });

  beforeAll(async () => {
    cluster = await NatsCluster.start(3);
    postgres.port = await freePort();
    const { url } = await startPg();
    stack = await startStack('faults', { env: { NATS_URL: cluster.urls.join(','), NATS_REPLICAS: '3', DATABASE_URL: url } });
    nc = await cluster.connect();
  }, 120_000);

  afterAll(() =>
    everyStep([
      () => watches.forEach((w) => w.stop()), // a failed assertion leaves them polling, and jest would not exit
      ...replicas.map((r) => () => r.stop()),
      () => db?.end(),
      () => nc?.close(),
      () => stack?.stop(),
      () => cluster?.stop(),
      () => stopPostgres(pgDir),
      () => rmSync(pgDir, { recursive: true, force: true }),
    ]),
  );

  it('completes every accepted task once through kill -9 of a NATS server and a replica of each service and a Postgres restart', async () => {
    const first = stack.services() as Record<Service, { pid: number }>;
    const environ = Object.fromEntries(CONTROL_PLANE.map((s) => [s, environOf(first[s].pid)])) as Record<Service, Record<string, string>>;
    const url = (env: Record<string, string>) => `http://127.0.0.1:${env.HTTP_PORT}`;
    // The second replica of each service: the same environment as `up` gave the first, its own port.
    for (const s of CONTROL_PLANE) {
      const replica = new ServiceProcess(s, { ...environ[s], HTTP_PORT: String(await freePort()) }).start();
      replicas.push(replica);
    }
    await Promise.all(replicas.map((r) => r.ready()));
    const second = Object.fromEntries(replicas.map((r) => [r.name, r])) as Record<Service, ServiceProcess>;
    const gateways = [stack.gateway, url(second.gateway.env)];
    const auth = { authorization: `Bearer ${stack.token}` };

    const dir = mkdtempSync(join(tmpdir(), 'tern-faults-queue-'));
    cpSync(join(EXAMPLES, 'task-queue'), dir, { recursive: true });
    const spec = readFileSync(join(dir, 'tern.yaml'), 'utf8')
      .replace(/^name:.*$/m, 'name: sturdy')
      .replace(/^keep_warm_seconds:.*$/m, 'keep_warm_seconds: 60');
    writeFileSync(join(dir, 'tern.yaml'), spec);
    const deployed = await stack.tern('deploy', join(dir, 'tern.yaml'));
    rmSync(dir, { recursive: true, force: true });
    expect(deployed.code).toBe(0);

    watches = CONTROL_PLANE.map((s) => new ReadinessWatch(s, url(second[s].env)));
    const answers = new Map<number | string, number>();
    const count = (k: number | string) => answers.set(k, (answers.get(k) ?? 0) + 1);
    const accepted = new Map<string, number>(); // task id -> n
    const t0 = Date.now();
    let turn = 0;
    /** Submits task n until a gateway accepts it (202), as a client that retries on 503 or a dead gateway does. */
    const submit = async (n: number) => {
      for (;;) {
        const gateway = gateways[turn++ % 2];
        // (undici's errors come from another realm than the test's: told apart by shape, not instanceof)
        const res = await fetch(`${gateway}/taskqueue/sturdy`, {
          method: 'POST',
          headers: { ...auth, 'content-type': 'application/json' },
          body: JSON.stringify({ n, seconds: 0.01 }),
          signal: AbortSignal.timeout(10_000),
        }).then(
          (r) => r,
          (e: Error) => ({ failed: e.name === 'TimeoutError' ? 'hang' : 'refused' }),
        );
        if ('failed' in res) {
          count(res.failed);
          await new Promise((r) => setTimeout(r, 200));
          continue;
        }
        count(res.status);
        if (res.status === 202) return accepted.set(((await res.json()) as { task_id: string }).task_id, n);
        await res.body?.cancel();
        await new Promise((r) => setTimeout(r, 200));
      }
    };
    let next = 0;
    const submitting = Promise.all(
      Array.from({ length: 16 }, async () => {
        while (next < TASKS) await submit(next++);
      }),
    );

    // The faults, once a third of the tasks are in.
    await waitFor('a third of the tasks accepted', async () => accepted.size >= TASKS / 3, 60_000, 100);
    const ns = new Namespace(stack.env.NATS_NAMESPACE!);
    const messaging = new Messaging(nc, ns);
    const jsm = await messaging.jsm();
    const leaderName = (await jsm.streams.info(ns.stream('TASKS'))).cluster!.leader!;
    const victim = cluster.nodes.find((n) => n.name === leaderName)!;
    // Whether the victim also leads a lease's bucket: then the lease waits for its election too.
    const leaseBuckets = { autoscaler: AUTOSCALER_LEADER_BUCKET, reputation: REPUTATION_LEADER_BUCKET };
    const bucketLedByVictim = Object.fromEntries(
      await Promise.all(
        Object.entries(leaseBuckets).map(async ([name, b]) => [
          name,
          (await jsm.streams.info(`KV_${ns.bucket(b.name)}`)).cluster?.leader === leaderName,
        ]),
      ),
    ) as Record<keyof typeof leaseBuckets, boolean>;
    const kvm = new Kvm(nc);
    const leases = await Promise.all(
      Object.entries(leaseBuckets).map(async ([name, b]) => LeaseWatch.start(name, await kvm.open(ns.bucket(b.name)))),
    );
    const killedAt = Date.now();
    await victim.kill();
    // The first replicas: likelier to hold the leases. `up`'s supervisor starts them again later,
    // as a process manager would; the second replicas are the survivors watched.
    for (const s of CONTROL_PLANE) process.kill(first[s].pid, 'SIGKILL');

    await new Promise((r) => setTimeout(r, 3000));
    const before = accepted.size;
    const pgDownAt = Date.now(); // from the moment the fast shutdown begins
    await stopPostgres(pgDir);
    // While Postgres is down the surviving gateway answers 503 with Retry-After, quickly.
    const probes: { what: string; status: number; ms: number; retryAfter: string | null; message: string }[] = [];
    const probe = async (what: string, init: RequestInit, path: string) => {
      const started = Date.now();
      const res = await fetch(`${gateways[1]}${path}`, {
        ...init,
        headers: { ...auth, 'content-type': 'application/json' },
        signal: AbortSignal.timeout(15_000),
      });
      const body = (await res.json().catch(() => ({}))) as { message?: string };
      probes.push({
        what,
        status: res.status,
        ms: Date.now() - started,
        retryAfter: res.headers.get('retry-after'),
        message: body.message ?? '',
      });
    };
    const someTask = [...accepted.keys()][0];
    await probe('submit', { method: 'POST', body: '{"n": -1}' }, '/taskqueue/sturdy');
    await probe('get', {}, `/api/v1/tasks/${someTask}`);
    await probe('list', {}, '/api/v1/tasks?limit=5');
    await new Promise((r) => setTimeout(r, Math.max(0, POSTGRES_DOWN_MS - (Date.now() - pgDownAt))));
    await startPg();
    const pgDown: Gap = { start: pgDownAt, end: Date.now() };
    const pgDownMs = pgDown.end - pgDown.start;
    for (const p of probes) {
      expect(p).toMatchObject({ status: 503, retryAfter: '5' });
      expect(p.message).toMatch(/database is unavailable/);
      expect(p.ms).toBeLessThan(6000); // a stopped server refuses at once; the pool's 10 s bound is for a hung one
    }

    await submitting;
    const submittedMs = Date.now() - t0;
    expect(accepted.size).toBe(TASKS);
    // Accepted, 503 while Postgres was down, or refused by the killed gateway until it restarted: no 500, no hang.
    expect([...answers.keys()].filter((k) => ![202, 503, 'refused'].includes(k))).toEqual([]);

    db = new pg.Client({
      connectionString: `postgres://postgres:${postgres.password}@127.0.0.1:${postgres.port}/tern`,
      options: `-c search_path=${stack.env.DATABASE_SCHEMA}`,
    });
    await db.connect();
    const ids = [...accepted.keys()];
    const done = await waitFor(
      'every accepted task done',
      async () => {
        const { rows } = await db!.query(
          `SELECT COUNT(*)::int AS n FROM tasks WHERE id = ANY($1) AND state IN ('COMPLETE', 'ERROR', 'TIMEOUT')`,
          [ids],
        );
        return rows[0].n === TASKS ? Date.now() : undefined;
      },
      90_000,
      500,
    );
    // Per surviving replica: its longest gap, and how far its gaps reach before Postgres stopped and after it was back.
    const gaps = Object.fromEntries(
      watches.map((w) => {
        const list = w.stop();
        const beyond = list.map((g) => beyondPostgres(g, pgDown));
        return [
          w.name,
          {
            longest: Math.max(0, ...list.map((g) => g.end - g.start)),
            before: Math.max(0, ...beyond.map((b) => b.before)),
            after: Math.max(0, ...beyond.map((b) => b.after)),
          },
        ];
      }),
    );

    const { rows } = await db.query(`SELECT id, state, attempts, result FROM tasks WHERE id = ANY($1)`, [ids]);
    expect(rows).toHaveLength(TASKS);
    expect(rows.filter((r) => r.state !== 'COMPLETE').map((r) => `${r.id} ${r.state}`)).toEqual([]);
    for (const r of rows) expect(r.result).toMatchObject({ n: accepted.get(r.id), square: accepted.get(r.id)! ** 2 });
    expect(new Set(rows.map((r) => accepted.get(r.id))).size).toBe(TASKS);
    const attempts = new Map<number, number>();
    for (const r of rows) attempts.set(r.attempts, (attempts.get(r.attempts) ?? 0) + 1);

    // Metering: each task attempt the gateway announced counted once, equal to a replay of
    // TASK_ATTEMPT_ENDED and TASK_ATTEMPTS_ENDED. A gateway killed between settling a task and announcing it announces
    // it when the agent's event comes back (its ack wait): the replay waits for every task's.
    const replay = async () => {
      const facts = new Map<string, string>();
      // One consumer per subject: NATS 2.9 takes one filter subject per consumer.
      for (const contract of [TASK_ATTEMPT_ENDED, TASK_ATTEMPTS_ENDED]) {
        const consumer = await messaging.js.consumers.get(ns.stream('EVENTS'), { filter_subjects: messaging.subject(contract) });
        for (;;) {
          let seen = 0;
          for await (const m of await consumer.fetch({ max_messages: 500, expires: 1000 })) {
            seen++;
            const told = contract === TASK_ATTEMPTS_ENDED ? m.json<TaskAttemptsEnded>().attempts : [m.json<TaskAttemptEnded>()];
            for (const e of told) if (accepted.has(e.taskId)) facts.set(`${e.taskId}:${e.attempt}`, e.outcome);
          }
          if (!seen) break;
        }
      }
      return facts;
    };
    const { facts, metered } = await waitFor(
      'metering equal to the replay of every accepted task',
      async () => {
        const facts = await replay();
        if ([...facts.values()].filter((o) => o === 'completed').length !== TASKS) return undefined;
        const m = await db!.query(`SELECT task_id, attempt, outcome FROM metered_tasks WHERE task_id = ANY($1) AND outcome <> 'running'`, [
          ids,
        ]);
        const metered = new Map(m.rows.map((r) => [`${r.task_id}:${r.attempt}`, r.outcome as string]));
        return metered.size === facts.size && [...facts].every(([k, v]) => metered.get(k) === v) ? { facts, metered } : undefined;
      },
      60_000,
      1000,
    );
    expect([...metered.values()].filter((o) => o === 'completed')).toHaveLength(TASKS);
    expect(new Set([...metered].filter(([, o]) => o === 'completed').map(([k]) => k.split(':')[0])).size).toBe(TASKS);
    const meteredMs = Date.now() - killedAt;

    // The services with a leader lease: when another replica took it over, after the kill (0: a
    // survivor held it already). Someone must hold it at the end.
    const takeovers: Record<string, number> = Object.fromEntries(
      await Promise.all(
        leases.map(async (w) => {
          const { holder, takenOver } = await w.stop();
          expect({ name: w.name, held: Boolean(holder) }).toEqual({ name: w.name, held: true });
          return [w.name, takenOver ? Math.max(0, takenOver.at - killedAt) : 0];
        }),
      ),
    );
    console.log(
      `faults: ${TASKS} tasks accepted in ${submittedMs} ms through 2 gateways (${before} before Postgres stopped), every one COMPLETE once ` +
        `${done - killedAt} ms after the kills; attempts ${JSON.stringify(Object.fromEntries(attempts))}; answers ${JSON.stringify(Object.fromEntries(answers))}; ` +
        `killed NATS ${leaderName} (leader of TASKS) and one replica of ${CONTROL_PLANE.join(', ')}; Postgres down ${pgDownMs} ms, ` +
        `probes ${probes.map((p) => `${p.what} ${p.status} in ${p.ms} ms`).join(', ')}; /health/ready gaps per surviving replica (ms: longest, before Postgres stopped, after it was back) ` +
        `${JSON.stringify(gaps)}; lease takeovers (ms after the kill) ${JSON.stringify(takeovers)} (bucket led by the killed server: ${JSON.stringify(bucketLedByVictim)}); metering ${metered.size} attempts equal to the replay of ${facts.size} ${meteredMs} ms after the kills`,
    );
    for (const [name, ms] of Object.entries(takeovers)) {
      const bound = TAKEOVER_MS + TIMER_SLACK_MS + (bucketLedByVictim[name as keyof typeof leaseBuckets] ? NATS_ELECTION_MS : 0);
      expect({ name, ms, within: ms <= bound }).toMatchObject({ name, within: true });
    }
    for (const [name, gap] of Object.entries(gaps))
      expect({ name, gap, within: gap.before <= TAKEOVER_MS + TIMER_SLACK_MS && gap.after <= TAKEOVER_MS + TIMER_SLACK_MS }).toMatchObject({
        name,
        within: true,
      });
  }, 150_000);
});
