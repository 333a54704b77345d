/**
 * How many agents the control plane holds (issues 19 and 32): simulated agents, no containers,
 * each with its own NATS connection and machine user (fleet.ts: spread over worker processes),
 * against the real scheduler, reputation and metering (built dist/, child processes) on a private
 * nats-server in operator mode and a database of the bench's own. Steps the agent count up until
 * heartbeat processing lags more than --max-lag-ms at p99 (two steps in a row), then drops
 * --rejoin agents at once and times their return. Not a test. See README.md.
 */
import 'reflect-metadata';
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect, credsAuthenticator, type NatsConnection, type Subscription } from '@nats-io/transport-node';
import pg from 'pg';
import { HEARTBEATS_BUCKET, MACHINE_BEAT, type MachineHeartbeat } from '#tern/contracts';
import { Namespace } from '#tern/messaging';
import { type AccountSigner } from '#tern/nats-auth';
import { freePort } from '#tern/runtime';
import { benchArgs } from '../args.js';
import { stopOnInterrupt } from '../interrupt.js';
import { ROOT, sleep } from '../invoke/stack.js';
import { agentId, Fleet } from './fleet.js';
import { startNatsServers } from './nats-servers.js';
import { ReputationLag } from './reputation-lag.js';
import { profileNats, resetStatements, topStatements } from './profile.js';
import { padMissing, printSummary, type StepResult, stepLine, summarise, ticksBetween, usage } from './report.js';
import { ServiceProcess } from './services.js';

const USAGE = `usage: npm run build && ulimit -n 65536 && node dist/bench/agents/main.js [options]

  --steps N,N,...            agent counts to step through (default 5000,10000,15000,20000)
  --measure-seconds S        the measured window of each step (default 30)
  --join-seconds S           newcomers of a step join spread over S seconds (default 60)
  --rejoin N                 after the steps, N agents drop at once, go offline, and rejoin at once (default 5000; 0: none)
  --workers N                processes holding the simulated agents' connections (default 4)
  --container-every S        each agent starts or stops a container every S seconds (default 300)
  --sample N                 machines whose heartbeat lag is measured (default 400)
  --max-lag-ms MS            p99 lag over which a step does not count as sustained (default 1000)
  --scheduler-replicas N     scheduler processes sharing its consumers (default 1)
  --nats-servers N           a NATS cluster of N servers, agents spread over them in turn (default 1; a server here holds ≤ 18,000)
  --nats-replicas N          copies JetStream keeps of each stream (NATS_REPLICAS; default 1, at most --nats-servers)
  --database URL             Postgres to create the bench's database in (default $BENCH_DATABASE_URL or postgres://postgres@127.0.0.1:5432/postgres)
  --profile-dir DIR          per step: nats-server pprof CPU profile and monitoring summaries, pg_stat_statements
                             (where preloaded), and the services' V8 CPU profiles (at exit)
  -h, --help                 this text`;

const OPTIONS = {
  steps: { type: 'string', default: '5000,10000,15000,20000' },
  'measure-seconds': { type: 'string', default: '30' },
  'join-seconds': { type: 'string', default: '60' },
  rejoin: { type: 'string', default: '5000' },
  workers: { type: 'string', default: '4' },
  'container-every': { type: 'string', default: '300' },
  sample: { type: 'string', default: '400' },
  'max-lag-ms': { type: 'string', default: '1000' },
  'scheduler-replicas': { type: 'string', default: '1' },
  'nats-servers': { type: 'string', default: '1' },
  'nats-replicas': { type: 'string', default: '1' },
  database: { type: 'string', default: process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres' },
  'profile-dir': { type: 'string' },
} as const;

function options() {
  const fail = (why: string): never => {
    console.error(`${why}\n\n${USAGE}`);
    process.exit(2);
  };
  const values = benchArgs(USAGE, OPTIONS);
  const count = (name: keyof typeof OPTIONS, min = 1) => {
    const n = Number(values[name]);
    return Number.isInteger(n) && n >= min ? n : fail(`--${name} must be a whole number ≥ ${min}, not "${String(values[name])}"`);
  };
  const steps = values.steps!.split(',').map(Number);
  if (steps.some((n, i) => !Number.isInteger(n) || n < 1 || n <= (steps[i - 1] ?? 0)))
    fail(`--steps must be increasing whole numbers, not "${values.steps}"`);
  return {
    steps,
    measureMs: count('measure-seconds') * 1000,
    joinMs: count('join-seconds', 0) * 1000,
    rejoin: count('rejoin', 0),
    workers: count('workers'),
    containerEveryMs: count('container-every') * 1000,
    sample: count('sample'),
    maxLagMs: count('max-lag-ms'),
    schedulerReplicas: count('scheduler-replicas'),
    natsServers: count('nats-servers'),
    natsReplicas: Math.min(count('nats-replicas'), count('nats-servers')),
    database: values.database!,
    profileDir: values['profile-dir'] ? resolve(values['profile-dir']) : undefined,
  };
}

const o = options();
const BEAT_MS = 10_000;
/** How long a step waits, after its joins, for its newcomers to be ready before measuring anyway. */
const MAX_JOIN_MS = 180_000;
const SERVICES = ['scheduler', 'reputation', 'metering'] as const;
const tag = `agents${randomBytes(3).toString('hex')}`;
const ns = new Namespace(tag);
const log = (m: string) => console.error(`[${new Date().toISOString().slice(11, 19)}] ${m}`);
const load = () =>
  loadavg()
    .map((x) => x.toFixed(1))
    .join(' ');

type AuthModule = {
  writeCreds(dir: string, namespace: string, principals: string[]): Promise<Record<string, string>>;
  writeAdminCreds(dir: string, name?: string): Promise<string>;
};

/** Each nats-server inherits this process's limit on open files, and needs one per agent it holds. */
async function checkOpenFiles(agents: number, servers: number) {
  const limits = await readFile('/proc/self/limits', 'utf8');
  const soft = Number(/Max open files\s+(\d+)/.exec(limits)?.[1] ?? Infinity);
  const perServer = Math.ceil(agents / servers);
  if (soft < perServer + 2000)
    throw new Error(
      `open files limit ${soft} is too low for ${perServer} agents per nats-server: run it after \`ulimit -n ${perServer + 2000}\`, or with more --nats-servers`,
    );
}

async function main() {
  await checkOpenFiles(o.steps.at(-1)!, o.natsServers);
  const authLib = (await import(pathToFileURL(join(ROOT, 'scripts/lib/nats-auth.mjs')).href)) as AuthModule;
  const dir = await mkdtemp(join(tmpdir(), 'tern-bench-agents-'));
  const nats = await startNatsServers(o.natsServers, dir);
  const creds = await authLib.writeCreds(dir, tag, [...SERVICES]);
  const admin = credsAuthenticator(await readFile(await authLib.writeAdminCreds(dir, 'bench')));
  const signer = JSON.parse(await readFile(join(dir, 'signer.json'), 'utf8')) as AccountSigner;
  for (const [i, m] of nats.monitors.entries())
    log(`${m.name} ${nats.urls[i]} (pid ${nats.pids[i]}), monitoring on 127.0.0.1:${m.httpPort}, pprof on 127.0.0.1:${m.profPort}`);

  const root = new pg.Client({ connectionString: o.database });
  await root.connect();
  await root.query(`CREATE DATABASE ${tag}`);
  const databaseUrl = new URL(o.database);
  databaseUrl.pathname = `/${tag}`;
  const db = new pg.Client({ connectionString: databaseUrl.href });

  const services: ServiceProcess[] = [];
  let windowStart = Infinity;
  let windowEnd = Infinity;
  const measuring = (sentAt: number) => sentAt >= windowStart && sentAt < windowEnd;
  const reputation = new ReputationLag(measuring);
  const fleet = new Fleet(o.workers, (id, sequence, sentAt) => reputation.beat(id, sequence, sentAt));
  const shared = await connect({ servers: nats.urls, authenticator: admin, name: 'bench-agents' });
  // However the run ends (its end, an error, Ctrl-C, a `timeout`'s SIGTERM): no agent, service,
  // nats-server or database of it is left behind to load the machine for whatever runs next.
  const cleanup = stopOnInterrupt(async () => {
    await fleet.stop().catch(() => undefined);
    await shared.close().catch(() => undefined);
    for (const s of services) await s.stop().catch(() => undefined);
    await db.end().catch(() => undefined);
    await root.query(`DROP DATABASE IF EXISTS ${tag} WITH (FORCE)`).catch((e: Error) => log(`drop database: ${e.message}`));
    await root.end().catch(() => undefined);
    nats.stop();
    await sleep(500);
    await rm(dir, { recursive: true, force: true });
  }, log);
  try {
    await jetStreamReady(shared);
    for (const name of SERVICES)
      for (let replica = 0; replica < (name === 'scheduler' ? o.schedulerReplicas : 1); replica++) {
        const env: Record<string, string> = {
          NATS_URL: nats.urls.join(','),
          NATS_REPLICAS: String(o.natsReplicas),
          NATS_CREDS: creds[name]!,
          NATS_NAMESPACE: tag,
          DATABASE_URL: databaseUrl.href,
          HTTP_PORT: String(await freePort()),
          LOG_LEVEL: 'info',
        };
        const nodeArgs = o.profileDir ? ['--cpu-prof', `--cpu-prof-dir=${join(o.profileDir, `${name}-${replica}`)}`] : [];
        const service = new ServiceProcess(name, env, nodeArgs).start();
        services.push(service);
        httpPorts.set(service, env.HTTP_PORT!);
        await service.ready(120_000);
        log(`${name} up (pid ${service.pid})`);
      }
    await db.connect();
    await fleet.init(
      {
        urls: nats.urls,
        tag,
        beatMs: BEAT_MS,
        containerEveryMs: o.containerEveryMs,
        deploymentId: randomUUID(),
        workspaceId: randomUUID(),
      },
      signer,
    );

    const schedulerLags: number[] = [];
    let sampled = new Set<string>();
    // The scheduler's KV put of a sampled machine's snapshot, seen on its subject as the scheduler makes it.
    // The sample's subjects alone: a wildcard over the bucket had nats-server deliver every machine's
    // snapshot to the bench (a message per beat, counted as the control plane's cost).
    const bucket = ns.bucket(HEARTBEATS_BUCKET.name);
    let snapshotSubs: Subscription[] = [];
    const watchSnapshots = (ids: Iterable<string>) => {
      for (const sub of snapshotSubs) sub.unsubscribe();
      snapshotSubs = [...ids].map((id) =>
        shared.subscribe(`$KV.${bucket}.${id}`, {
          callback: (_e, msg) => {
            const sentAt = Date.parse(msg.json<MachineHeartbeat>().sentAt);
            if (measuring(sentAt)) schedulerLags.push(Date.now() - sentAt);
          },
        }),
      );
    };
    let polling = true;
    const reputationPoll = (async () => {
      while (polling) {
        const { rows } = await db.query<{ id: string; seq: string | null }>(
          `SELECT machine_id AS id, heartbeats->>'lastSequence' AS seq FROM reputation_machines WHERE machine_id = ANY($1)`,
          [[...sampled]],
        );
        const now = Date.now();
        for (const r of rows) if (r.seq !== null) reputation.storedSequence(r.id, Number(r.seq), now);
        await sleep(100);
      }
    })();
    // Its failure is seen where it is awaited; meanwhile (a cleanup closing the database under it) it must not end the process.
    reputationPoll.catch(() => undefined);
    const readyAmong = async (first: number, last: number) =>
      Number(
        (
          await db.query<{ n: string }>(`SELECT count(*) AS n FROM machines WHERE state = 'ready' AND id = ANY($1)`, [
            Array.from({ length: last - first }, (_, i) => agentId(first + i)),
          ])
        ).rows[0]!.n,
      );

    const results: StepResult[] = [];
    let agents = 0;
    for (const count of o.steps) {
      log(`step ${count}: ${count - agents} agents join over ${o.joinMs / 1000} s, each with its own connection and user`);
      const ids = Array.from({ length: count - agents }, (_, i) => agentId(agents + i));
      // Rows as registration leaves them: registered with an inventory of 8 GPUs, not yet beating.
      const gpus = JSON.stringify(Array.from({ length: 8 }, (_, index) => ({ index, vendor: 'nvidia', model: 'H100', memoryMiB: 81559 })));
      await db.query(
        `INSERT INTO machines (id, pool, state, hostname, cpu_cores, memory_bytes, gpus, agent_version, registered_at)
         SELECT id, 'default', 'registered', id, 64, 1099511627776, $2::jsonb, 'bench', now() FROM unnest($1::text[]) AS id`,
        [ids, gpus],
      );
      // A fixed sample spread over the whole fleet.
      const every = Math.max(1, Math.floor(count / o.sample));
      sampled = new Set(Array.from({ length: Math.ceil(count / every) }, (_, i) => agentId(i * every)));
      watchSnapshots(sampled);
      await fleet.sample([...sampled]);
      schedulerLags.length = 0;
      reputation.lags.length = 0;
      windowStart = windowEnd = Infinity;
      const stepStart = Date.now();
      await fleet.join(agents, count, o.joinMs);
      agents = count;
      while ((await readyAmong(0, count)) < count && Date.now() - stepStart < o.joinMs + MAX_JOIN_MS) await sleep(1000);
      const joinSeconds = (Date.now() - stepStart) / 1000;
      // One period more, so the window measures the steady state.
      await sleep(BEAT_MS);
      const groups = () => {
        const out: Record<string, number[]> = {};
        for (const s of services) (out[s.name] ??= []).push(s.pid!);
        return { ...out, nats: nats.pids, fleet: fleet.pids };
      };
      const pgPids = async () =>
        // Not the bench's own connection: its lag and readiness probes are no cost of the control plane's.
        (
          await db.query<{ pid: number }>(`SELECT pid FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()`, [tag])
        ).rows.map((r) => r.pid);
      const statements = o.profileDir ? await resetStatements(db) : false;
      const before = await usage({ ...groups(), postgres: await pgPids() });
      const handledBefore = await beatsHandled(services);
      fleet.sent = fleet.errors = 0;
      windowStart = Date.now();
      const profile = o.profileDir
        ? Promise.all(
            nats.monitors.map((m) =>
              profileNats(o.profileDir!, count, m, o.measureMs / 1000 - 1).then(
                (top) => top.map((line) => `${m.name}: ${line}`),
                (e: Error) => [`${m.name}: ${e.message}`],
              ),
            ),
          ).then((tops) => tops.flat())
        : undefined;
      await sleep(o.measureMs);
      windowEnd = Date.now();
      const after = await usage({ ...groups(), postgres: await pgPids() });
      const handledAfter = await beatsHandled(services);
      const sent = fleet.sent;
      // Beats still unapplied a grace period after the window count as lagging past the limit.
      await sleep(2 * o.maxLagMs);
      const expected = sampled.size * (o.measureMs / BEAT_MS);
      const r = summarise(
        { agents: count, joinSeconds, publishErrors: fleet.errors, loadAverage: load(), seconds: o.measureMs / 1000, sent },
        before,
        after,
        { scheduler: padMissing(schedulerLags, expected), reputation: padMissing(reputation.lags, expected) },
      );
      results.push(r);
      log(stepLine(r));
      // CPU per beat handled: what a service costs per message, whatever share of the machine it got.
      for (const service of ['scheduler', 'reputation']) {
        const [ok, dropped] = ['ok', 'dropped'].map((k) => (handledAfter[service]?.[k] ?? 0) - (handledBefore[service]?.[k] ?? 0));
        const cpuMs = (after[service] ? ticksBetween(before[service], after[service]) : 0) * 10;
        log(
          `  ${service}: ${ok} beats handled in the window (${dropped} dropped), ${ok ? (cpuMs / ok).toFixed(2) : '∞'} ms of CPU per beat`,
        );
      }
      for (const line of (await profile) ?? []) log(`  nats pprof: ${line.trim()}`);
      if (statements) for (const line of await topStatements(db, o.profileDir!, count)) log(`  postgres: ${line}`);
      if (r.p99 > o.maxLagMs)
        for (const service of services) for (const line of service.warnings(3)) log(`  ${service.name}: ${line.slice(0, 300)}`);
      // Two steps over the limit in a row: one alone may be another process's stall on a shared machine.
      if (r.p99 > o.maxLagMs && (results.at(-2)?.p99 ?? 0) > o.maxLagMs) break;
    }
    polling = false;
    await reputationPoll;
    let rejoined: string | undefined;
    if (o.rejoin > 0 && o.rejoin <= agents) rejoined = await rejoin(fleet, db, o.rejoin, readyAmong);
    printSummary(results, o.maxLagMs);
    if (rejoined) console.log(rejoined);
  } finally {
    await cleanup();
  }
}

/** Until JetStream answers (a cluster's first has to elect its meta leader). */
async function jetStreamReady(nc: NatsConnection) {
  const deadline = Date.now() + 30_000;
  for (;;) {
    try {
      await (await jetstreamManager(nc, { timeout: 2000 })).getAccountInfo();
      return;
    } catch (e) {
      if (Date.now() > deadline) throw new Error(`JetStream not answering: ${(e as Error).message}`, { cause: e });
      await sleep(250);
    }
  }
}

/** Each service process's HTTP port (its /metrics). */
const httpPorts = new Map<ServiceProcess, string>();

/**
 * Beats each service has handled so far, by outcome (`ok`, `dropped`…), its replicas summed: the
 * services' own counter of core NATS events (`tern_events_handled_total`), read from /metrics.
 */
async function beatsHandled(services: readonly ServiceProcess[]): Promise<Record<string, Record<string, number>>> {
  const out: Record<string, Record<string, number>> = {};
  const line = new RegExp(`^tern_events_handled_total\\{([^}]*)\\} (\\S+)$`, 'gm');
  for (const s of services) {
    const text = await (await fetch(`http://127.0.0.1:${httpPorts.get(s)}/metrics`)).text();
    for (const [, labels, value] of text.matchAll(line)) {
      if (!labels!.includes(`subject="${MACHINE_BEAT.subject}"`)) continue;
      const outcome = /outcome="([^"]+)"/.exec(labels!)?.[1] ?? '';
      const mine = (out[s.name] ??= {});
      mine[outcome] = (mine[outcome] ?? 0) + Number(value);
    }
  }
  return out;
}

/**
 * A site coming back after an outage: the first n agents drop their connections at once, stay
 * away until the scheduler has marked every one offline, then reconnect at once (their users
 * kept, as a restarted agent keeps its credentials). Returns the line to print.
 */
async function rejoin(fleet: Fleet, db: pg.Client, n: number, readyAmong: (first: number, last: number) => Promise<number>) {
  log(`rejoin: ${n} agents drop at once`);
  await fleet.drop(0, n);
  const dropped = Date.now();
  const ids = Array.from({ length: n }, (_, i) => agentId(i));
  const offline = async () =>
    Number(
      (await db.query<{ n: string }>(`SELECT count(*) AS n FROM machines WHERE state = 'offline' AND id = ANY($1)`, [ids])).rows[0]!.n,
    );
  while ((await offline()) < n && Date.now() - dropped < 180_000) await sleep(1000);
  log(`rejoin: ${await offline()} of ${n} offline after ${((Date.now() - dropped) / 1000).toFixed(0)} s; all reconnect at once`);
  const start = Date.now();
  const retried = fleet.retries;
  const joined = fleet.join(0, n, 0).then(() => Date.now());
  let ready = await readyAmong(0, n);
  while (ready < n && Date.now() - start < 300_000) {
    await sleep(500);
    ready = await readyAmong(0, n);
  }
  const readySeconds = (Date.now() - start) / 1000;
  const connectedSeconds = ((await joined) - start) / 1000;
  return `rejoin: ${n} agents at once (load ${load()}): connected in ${connectedSeconds.toFixed(1)} s (${fleet.retries - retried} connects refused and tried again), ${ready === n ? `all ready in ${readySeconds.toFixed(1)} s` : `${ready} ready after ${readySeconds.toFixed(0)} s`}`;
}

main().catch((e: Error) => {
  console.error(e.message.startsWith('open files limit') ? e.message : e);
  process.exit(1);
});
