/**
 * How many agents the control plane holds (issue 19): simulated agents, no containers, against
 * the real scheduler, reputation and metering (built dist/, child processes) on a private
 * nats-server in operator mode and a database of the bench's own. Steps the agent count up
 * until heartbeat processing lags more than --max-lag-ms at p99 (two steps in a row); prints per step the messages
 * per second, CPU and RSS per process (from /proc), p50/p99 lag, then the sustained count and
 * the cost per 10,000 agents. Not a test. See README.md for what is simulated and how.
 *
 *   npm run build && node dist/bench/agents/main.js [--steps 1000,2000,5000,10000,20000,50000,100000]
 *       [--measure-seconds 30] [--connections 1000] [--container-every 300] [--sample 400] [--max-lag-ms 1000]
 *       [--scheduler-replicas 1]
 *       [--database postgres://postgres@127.0.0.1:5432/postgres]
 */
import 'reflect-metadata';
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { jetstream, type JetStreamClient, jetstreamManager } from '@nats-io/jetstream';
import { connect, credsAuthenticator, type NatsConnection } from '@nats-io/transport-node';
import pg from 'pg';
import {
  CONTAINER_STARTED,
  CONTAINER_STOPPED,
  HEARTBEATS_BUCKET,
  MACHINE_HEARTBEAT,
  type MachineHeartbeat,
  subjectFor,
} from '#tern/contracts';
import { Namespace } from '#tern/messaging';
import { type AccountSigner, formatCreds, issueMachineJwt, newUserKey } from '#tern/nats-auth';
import { freePort } from '#tern/runtime';
import { ROOT, sleep } from '../invoke/stack.js';

const { values } = parseArgs({
  options: {
    steps: { type: 'string', default: '1000,2000,5000,10000,20000,50000,100000' },
    'measure-seconds': { type: 'string', default: '30' },
    connections: { type: 'string', default: '1000' },
    'container-every': { type: 'string', default: '300' },
    sample: { type: 'string', default: '400' },
    'max-lag-ms': { type: 'string', default: '1000' },
    'scheduler-replicas': { type: 'string', default: '1' },
    database: { type: 'string', default: process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres' },
  },
});
const STEPS = values.steps!.split(',').map(Number);
const MEASURE_MS = Number(values['measure-seconds']) * 1000;
const CONNECTIONS = Number(values.connections);
const CONTAINER_EVERY_MS = Number(values['container-every']) * 1000;
const SAMPLE = Number(values.sample);
const MAX_LAG_MS = Number(values['max-lag-ms']);
const SCHEDULER_REPLICAS = Number(values['scheduler-replicas']);
const BEAT_MS = 10_000;
/** How long a step waits for the newcomers' first beats to be absorbed before measuring anyway. */
const MAX_JOIN_MS = 180_000;
const TICK_MS = 20;
const SERVICES = ['scheduler', 'reputation', 'metering'] as const;
/** Container events name a deployment the scheduler never placed them for (see README: what they cost). */
const DEPLOYMENT_ID = randomUUID();
const WORKSPACE_ID = randomUUID();

const tag = `agents${randomBytes(3).toString('hex')}`;
const ns = new Namespace(tag);
const log = (m: string) => console.error(`[${new Date().toISOString().slice(11, 19)}] ${m}`);

/** One simulated machine: its identity, the connection it publishes on, and its beat counter. */
interface SimAgent {
  id: string;
  js: JetStreamClient;
  sequence: number;
  /** The container it runs now (container events alternate started / stopped). */
  running?: string;
}

type NatsModule = {
  startNats(o: { dir: string; port: number; logFile: string }): Promise<{ pid: number; url: string; child: { kill(s: string): void } }>;
};
type AuthModule = {
  writeCreds(dir: string, namespace: string, principals: string[]): Promise<Record<string, string>>;
  writeAdminCreds(dir: string, name?: string): Promise<string>;
};

async function main() {
  const natsLib = (await import(pathToFileURL(join(ROOT, 'scripts/lib/nats.mjs')).href)) as NatsModule;
  const authLib = (await import(pathToFileURL(join(ROOT, 'scripts/lib/nats-auth.mjs')).href)) as AuthModule;
  const dir = await mkdtemp(join(tmpdir(), 'tern-bench-agents-'));
  const nats = await natsLib.startNats({ dir, port: await freePort(), logFile: join(dir, 'nats.log') });
  const creds = await authLib.writeCreds(dir, tag, [...SERVICES]);
  const admin = credsAuthenticator(await readFile(await authLib.writeAdminCreds(dir, 'bench')));
  const signer = JSON.parse(await readFile(join(dir, 'signer.json'), 'utf8')) as AccountSigner;

  const root = new pg.Client({ connectionString: values.database });
  await root.connect();
  await root.query(`CREATE DATABASE ${tag}`);
  const databaseUrl = new URL(values.database!);
  databaseUrl.pathname = `/${tag}`;
  const db = new pg.Client({ connectionString: databaseUrl.href });

  const services: ServiceProcess[] = [];
  const connections: NatsConnection[] = [];
  try {
    for (const name of SERVICES) {
      for (let replica = 0; replica < (name === 'scheduler' ? SCHEDULER_REPLICAS : 1); replica++) {
        const env = {
          NATS_URL: nats.url,
          NATS_CREDS: creds[name]!,
          NATS_NAMESPACE: tag,
          DATABASE_URL: databaseUrl.href,
          HTTP_PORT: String(await freePort()),
          LOG_LEVEL: 'info',
        };
        const service = new ServiceProcess(name, env).start();
        services.push(service);
        await service.ready(120_000);
        log(`${name} up (pid ${service.pid})`);
      }
    }
    await db.connect();
    // Ctrl-C: the services and NATS go with the bench (its database stays: DROP DATABASE agents<hex>).
    process.once('SIGINT', () => {
      for (const service of services) service.stop().catch(() => undefined);
      nats.child.kill('SIGTERM');
      setTimeout(() => process.exit(130), 2000);
    });
    const shared = await connect({ servers: nats.url, authenticator: admin, name: 'bench-agents-shared' });
    connections.push(shared);
    const sharedJs = jetstream(shared, { timeout: 30_000 });
    const jsm = await jetstreamManager(shared);

    const agents: SimAgent[] = [];
    /** Scheduler: the KV put of a sampled machine's snapshot, seen on its subject as the scheduler makes it. */
    const schedulerLags: number[] = [];
    const reputationLags: number[] = [];
    const sampled = new Map<string, SimAgent>();
    const reputationSeen = new Map<string, Map<number, number>>();
    const bucket = ns.bucket(HEARTBEATS_BUCKET.name);
    let windowStart = Infinity;
    let windowEnd = Infinity;
    const measuring = (sentAt: number) => sentAt >= windowStart && sentAt < windowEnd;

    const addAgents = async (count: number) => {
      const rows: string[] = [];
      for (let i = agents.length; i < count; i++) {
        const id = `bm${String(i).padStart(6, '0')}`;
        let js = sharedJs;
        if (i < CONNECTIONS) {
          const key = newUserKey();
          const jwt = await issueMachineJwt(signer, { namespace: tag, machineId: id, publicKey: key.publicKey, expiresInSeconds: 86_400 });
          const nc = await connect({
            servers: nats.url,
            authenticator: credsAuthenticator(new TextEncoder().encode(formatCreds(jwt, key.seed))),
            inboxPrefix: `_INBOX.${tag}.machine.${id}`,
            name: id,
          });
          connections.push(nc);
          js = jetstream(nc, { timeout: 30_000 });
        }
        agents.push({ id, js, sequence: 0 });
        rows.push(id);
      }
      // Rows as registration leaves them: registered with an inventory of 8 GPUs, not yet beating.
      const gpus = JSON.stringify(Array.from({ length: 8 }, (_, index) => ({ index, vendor: 'nvidia', model: 'H100', memoryMiB: 81559 })));
      for (let i = 0; i < rows.length; i += 5000)
        await db.query(
          `INSERT INTO machines (id, pool, state, hostname, cpu_cores, memory_bytes, gpus, agent_version, registered_at)
           SELECT id, 'default', 'registered', id, 64, 1099511627776, $2::jsonb, 'bench', now() FROM unnest($1::text[]) AS id`,
          [rows.slice(i, i + 5000), gpus],
        );
      // A fixed sample spread over the whole fleet (own-connection and shared agents alike).
      sampled.clear();
      const every = Math.max(1, Math.floor(agents.length / SAMPLE));
      for (let i = 0; i < agents.length; i += every) sampled.set(agents[i]!.id, agents[i]!);
    };

    // The scheduler's KV puts of sampled machines: their subject is $KV.<bucket>.<machine id>.
    const kvSub = shared.subscribe(`$KV.${bucket}.>`, {
      callback: (_e, msg) => {
        const id = msg.subject.slice(bucket.length + 5);
        const agent = sampled.get(id);
        if (!agent) return;
        const beat = msg.json<MachineHeartbeat>();
        const sentAt = Date.parse(beat.sentAt);
        if (measuring(sentAt)) schedulerLags.push(Date.now() - sentAt);
      },
    });
    // Reputation: the stored lastSequence of each sampled machine, read every 100 ms.
    let polling = true;
    const reputationPoll = (async () => {
      while (polling) {
        const ids = [...sampled.keys()];
        const { rows } = await db.query<{ id: string; seq: string | null }>(
          `SELECT machine_id AS id, heartbeats->>'lastSequence' AS seq FROM reputation_machines WHERE machine_id = ANY($1)`,
          [ids],
        );
        const now = Date.now();
        for (const r of rows) {
          const pending = reputationSeen.get(r.id);
          if (!pending || r.seq === null) continue;
          for (const [seq, sentAt] of pending)
            if (seq <= Number(r.seq)) {
              if (measuring(sentAt)) reputationLags.push(now - sentAt);
              pending.delete(seq);
            }
        }
        await sleep(100);
      }
    })();

    let sentMessages = 0;
    let publishErrors = 0;
    const publish = (agent: SimAgent, subject: string, payload: unknown, msgID: string) => {
      sentMessages++;
      agent.js.publish(subject, JSON.stringify(payload), { msgID }).catch(() => publishErrors++);
    };
    const beat = (agent: SimAgent, now: number) => {
      const sequence = ++agent.sequence;
      const hb: MachineHeartbeat = {
        machineId: agent.id,
        pool: 'default',
        sentAt: new Date(now).toISOString(),
        sequence,
        cpuPercent: 12.5,
        memoryPercent: 40,
        gpus: Array.from({ length: 8 }, (_, index) => ({ index, model: 'H100', memoryMiB: 81559, state: 'free' as const })),
        runningContainers: [],
        agentVersion: 'bench',
        isolation: { runtime: 'runc', network: 'private', userNamespaces: true },
      };
      if (sampled.has(agent.id)) {
        if (!reputationSeen.has(agent.id)) reputationSeen.set(agent.id, new Map());
        reputationSeen.get(agent.id)!.set(sequence, now);
      }
      publish(agent, ns.subject(subjectFor(MACHINE_HEARTBEAT, agent.id)), hb, `${agent.id}-${tag}-${sequence}`);
    };
    const containerEvent = (agent: SimAgent, now: number) => {
      const at = new Date(now).toISOString();
      const base = { deploymentId: DEPLOYMENT_ID, deploymentVersion: 1, workspaceId: WORKSPACE_ID, machineId: agent.id, at };
      if (agent.running) {
        const stopped = { ...base, containerId: agent.running, exitCode: 0, oomKilled: false, reason: 'stop command: scale-down' };
        publish(agent, ns.subject(subjectFor(CONTAINER_STOPPED, agent.id)), stopped, `${agent.running}-stopped`);
        agent.running = undefined;
      } else {
        agent.running = randomUUID();
        const resources = { cpuMillicores: 2000, memoryBytes: 8 * 2 ** 30, gpuCount: 1, gpuType: 'H100' };
        publish(
          agent,
          ns.subject(subjectFor(CONTAINER_STARTED, agent.id)),
          { ...base, containerId: agent.running, resources, startupLatencyMs: 900 },
          `${agent.running}-started`,
        );
      }
    };

    const results: StepResult[] = [];
    for (const count of STEPS) {
      log(`step ${count}: adding agents (${Math.min(count, CONNECTIONS)} with a connection of their own)`);
      await addAgents(count);
      schedulerLags.length = 0;
      reputationLags.length = 0;
      for (const m of reputationSeen.values()) m.clear();
      windowStart = windowEnd = Infinity;
      const stepStart = Date.now();
      // Each agent beats at its own offset within the period, and changes a container at its own offset within CONTAINER_EVERY_MS.
      const beats = spread(agents.length, BEAT_MS / TICK_MS);
      const changes = spread(agents.length, CONTAINER_EVERY_MS / TICK_MS);
      let slot = 0;
      const ticker = setInterval(() => {
        const now = Date.now();
        for (; stepStart + slot * TICK_MS <= now; slot++) {
          for (const i of beats[slot % beats.length]!) beat(agents[i]!, now);
          for (const i of changes[slot % changes.length]!) containerEvent(agents[i]!, now);
        }
      }, TICK_MS);
      // The agents just added join first (their first beat moves their machine to ready): the
      // window opens once a period has passed and the heartbeat consumers hold nothing, so it
      // measures the steady state, and the time to absorb the newcomers is a figure of its own.
      await sleep(BEAT_MS);
      while ((await backlog(jsm)) > 0 && Date.now() - stepStart < MAX_JOIN_MS) await sleep(500);
      const joinSeconds = (Date.now() - stepStart) / 1000;
      const before = await usage(services, nats.pid, db, tag);
      const streamsBefore = await storedMessages(jsm);
      sentMessages = 0;
      publishErrors = 0;
      windowStart = Date.now();
      await sleep(MEASURE_MS);
      windowEnd = Date.now();
      const after = await usage(services, nats.pid, db, tag);
      const streamsAfter = await storedMessages(jsm);
      const sent = sentMessages;
      // Beats still unapplied a grace period after the window count as lagging past the limit.
      await sleep(2 * MAX_LAG_MS);
      clearInterval(ticker);
      const expected = sampled.size * (MEASURE_MS / BEAT_MS);
      const r = summarise(count, joinSeconds, MEASURE_MS / 1000, sent, streamsAfter - streamsBefore, publishErrors, before, after, {
        scheduler: padMissing(schedulerLags, expected),
        reputation: padMissing(reputationLags, expected),
      });
      results.push(r);
      printStep(r);
      // Whether a lag is the services falling behind: what their heartbeat consumers still hold.
      for await (const c of jsm.consumers.list(ns.stream('HEARTBEATS')))
        log(
          `  consumer ${c.name}: ${c.num_pending} pending, ${c.num_ack_pending} delivered unacknowledged, ${c.num_redelivered} redelivered`,
        );
      if (r.p99 > MAX_LAG_MS)
        for (const service of services) for (const line of service.warnings(3)) log(`  ${service.name}: ${line.slice(0, 300)}`);
      // Two steps over the limit in a row: one alone may be another process's stall on a shared machine.
      if (r.p99 > MAX_LAG_MS && (results.at(-2)?.p99 ?? 0) > MAX_LAG_MS) break;
    }
    polling = false;
    await reputationPoll;
    kvSub.unsubscribe();
    printSummary(results);
  } finally {
    for (const nc of connections) await nc.close().catch(() => undefined);
    for (const s of services) await s.stop();
    await db.end().catch(() => undefined);
    await root.query(`DROP DATABASE IF EXISTS ${tag} WITH (FORCE)`).catch((e: Error) => log(`drop database: ${e.message}`));
    await root.end();
    nats.child.kill('SIGTERM');
    await sleep(500);
    await rm(dir, { recursive: true, force: true });
  }
}

/** Nearest rank, so beats never applied (Infinity) count as such and never interpolate to NaN. */
function quantile(xs: number[], q: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.max(0, Math.ceil(q * s.length) - 1)]!;
}

/** Agent indexes per slot of a period, the agents spread evenly over the slots whatever their count. */
function spread(agents: number, slots: number): number[][] {
  const out = Array.from({ length: slots }, () => [] as number[]);
  for (let i = 0; i < agents; i++) out[Math.floor((i * slots) / agents)]!.push(i);
  return out;
}

/** Beats of the sample never seen applied are counted as lagging forever. */
function padMissing(lags: number[], expected: number): number[] {
  const missing = Math.max(0, Math.round(expected) - lags.length);
  return [...lags, ...Array<number>(missing).fill(Infinity)];
}

/** Heartbeats the services have not acknowledged yet. */
async function backlog(jsm: Awaited<ReturnType<typeof jetstreamManager>>): Promise<number> {
  let n = 0;
  for await (const c of jsm.consumers.list(ns.stream('HEARTBEATS'))) n += c.num_pending + c.num_ack_pending;
  return n;
}

async function storedMessages(jsm: Awaited<ReturnType<typeof jetstreamManager>>): Promise<number> {
  let n = 0;
  for (const s of ['HEARTBEATS', 'EVENTS']) n += (await jsm.streams.info(ns.stream(s as 'EVENTS'))).state.messages;
  return n;
}

/** CPU ticks and RSS per process: the three services, nats-server, the Postgres backends of the bench's database, this process. */
type Usage = Record<string, { ticks: number; rssKiB: number }>;

async function usage(services: ServiceProcess[], natsPid: number, db: pg.Client, database: string): Promise<Usage> {
  const out: Usage = {};
  // A service's replicas together.
  for (const name of new Set(services.map((s) => s.name)))
    out[name] = await proc(services.filter((s) => s.name === name).map((s) => s.pid!));
  out.nats = await proc([natsPid]);
  const { rows } = await db.query<{ pid: number }>(`SELECT pid FROM pg_stat_activity WHERE datname = $1`, [database]);
  out.postgres = await proc(rows.map((r) => r.pid));
  out.bench = await proc([process.pid]);
  return out;
}

async function proc(pids: number[]): Promise<{ ticks: number; rssKiB: number }> {
  let ticks = 0;
  let rssKiB = 0;
  for (const pid of pids) {
    const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => '');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    ticks += Number(fields[11] ?? 0) + Number(fields[12] ?? 0);
    const status = await readFile(`/proc/${pid}/status`, 'utf8').catch(() => '');
    rssKiB += Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0);
  }
  return { ticks, rssKiB };
}

interface StepResult {
  agents: number;
  /** From the step's first beat until the heartbeat consumers held nothing (the newcomers absorbed). */
  joinSeconds: number;
  sentPerSecond: number;
  storedPerSecond: number;
  publishErrors: number;
  cpu: Record<string, number>;
  rssMiB: Record<string, number>;
  lag: Record<string, { p50: number; p99: number; n: number }>;
  p99: number;
}

function summarise(
  agents: number,
  joinSeconds: number,
  stepSeconds: number,
  sent: number,
  stored: number,
  publishErrors: number,
  before: Usage,
  after: Usage,
  lags: Record<string, number[]>,
): StepResult {
  const cpu: Record<string, number> = {};
  const rssMiB: Record<string, number> = {};
  for (const k of Object.keys(after)) {
    cpu[k] = (after[k]!.ticks - (before[k]?.ticks ?? 0)) / stepSeconds; // ticks of 10 ms per s = % of one core
    rssMiB[k] = after[k]!.rssKiB / 1024;
  }
  const lag: StepResult['lag'] = {};
  for (const [k, xs] of Object.entries(lags))
    lag[k] = xs.length ? { p50: quantile(xs, 0.5), p99: quantile(xs, 0.99), n: xs.length } : { p50: NaN, p99: Infinity, n: 0 };
  return {
    agents,
    joinSeconds,
    sentPerSecond: sent / stepSeconds,
    storedPerSecond: stored / stepSeconds,
    publishErrors,
    cpu,
    rssMiB,
    lag,
    p99: Math.max(...Object.values(lag).map((l) => l.p99)),
  };
}

const ms = (x: number) => (Number.isFinite(x) ? `${Math.round(x)}` : '∞');

function printStep(r: StepResult) {
  const procs = Object.keys(r.cpu)
    .map((k) => `${k} ${r.cpu[k]!.toFixed(0)}% ${r.rssMiB[k]!.toFixed(0)} MiB`)
    .join(', ');
  const lags = Object.entries(r.lag)
    .map(([k, l]) => `${k} p50 ${ms(l.p50)} / p99 ${ms(l.p99)} ms (n ${l.n})`)
    .join('; ');
  log(
    `${r.agents} agents (joined in ${r.joinSeconds.toFixed(0)} s): ${r.sentPerSecond.toFixed(0)} msgs/s sent, ${r.storedPerSecond.toFixed(0)} stored, ${r.publishErrors} publish errors; lag ${lags}; ${procs}`,
  );
}

function printSummary(results: StepResult[]) {
  const ok = results.filter((r) => r.p99 <= MAX_LAG_MS);
  const sustained = ok.at(-1);
  const names = Object.keys(results[0]?.cpu ?? {});
  // The control plane: everything but the bench's own simulated agents.
  const plane = names.filter((n) => n !== 'bench');
  const total = (r: StepResult) => plane.reduce((sum, n) => sum + r.cpu[n]!, 0);
  console.log(
    `\n| agents | join s | msgs/s | sched p50/p99 ms | rep p50/p99 ms | ${names.map((n) => `${n} CPU% / RSS MiB`).join(' | ')} | control plane CPU% | per 10k agents |`,
  );
  console.log(`| ---: | ---: | ---: | ---: | ---: | ${names.map(() => '---:').join(' | ')} | ---: | ---: |`);
  for (const r of results)
    console.log(
      `| ${r.agents} | ${r.joinSeconds.toFixed(0)} | ${r.sentPerSecond.toFixed(0)} | ${ms(r.lag.scheduler!.p50)} / ${ms(r.lag.scheduler!.p99)} | ${ms(r.lag.reputation!.p50)} / ${ms(r.lag.reputation!.p99)} | ${names.map((n) => `${r.cpu[n]!.toFixed(0)} / ${r.rssMiB[n]!.toFixed(0)}`).join(' | ')} | ${total(r).toFixed(0)} | ${((total(r) * 10_000) / r.agents).toFixed(0)} |`,
    );
  console.log(
    `\nsustained: ${sustained ? sustained.agents : `none (the first step, ${results[0]?.agents}, already lags)`} agents with p99 heartbeat lag ≤ ${MAX_LAG_MS} ms`,
  );
  // Growth: CPU and memory per 10k agents, from the two largest sustained steps (the slope, not the fixed cost).
  if (ok.length >= 2) {
    const [a, b] = [ok.at(-2)!, ok.at(-1)!];
    const per = 10_000 / (b.agents - a.agents);
    console.log(`per 10,000 agents (between ${a.agents} and ${b.agents}):`);
    for (const n of names)
      console.log(
        `  ${n}: +${((b.cpu[n]! - a.cpu[n]!) * per).toFixed(0)}% of a core, +${((b.rssMiB[n]! - a.rssMiB[n]!) * per).toFixed(0)} MiB`,
      );
    console.log(`  messages: +${((b.sentPerSecond - a.sentPerSecond) * per).toFixed(0)} msgs/s`);
  }
}

/** A control-plane service from the build, as `npm run up` starts it; its output kept for when it fails to start. */
class ServiceProcess {
  private child?: ChildProcess;
  private output = '';

  constructor(
    readonly name: string,
    private readonly env: Record<string, string>,
  ) {}

  get pid(): number | undefined {
    return this.child?.pid;
  }

  start(): this {
    this.child = spawn(process.execPath, [join(ROOT, `dist/apps/${this.name}/src/main.js`)], {
      cwd: ROOT,
      env: { PATH: process.env.PATH, HOME: process.env.HOME, ...this.env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const keep = (d: Buffer) => (this.output = (this.output + d.toString()).slice(-20_000));
    this.child.stdout!.on('data', keep);
    this.child.stderr!.on('data', keep);
    return this;
  }

  async ready(timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!/listening on|started \(no HTTP/.test(this.output)) {
      if (this.child!.exitCode !== null || Date.now() > deadline)
        throw new Error(`${this.name} did not start:\n${this.output.slice(-3000)}`);
      await sleep(100);
    }
  }

  /** The last warnings and errors it logged (what to look at when a step lags). */
  warnings(count: number): string[] {
    return this.output
      .split('\n')
      .filter((l) => /"level":(40|50|60)/.test(l))
      .slice(-count);
  }

  async stop(): Promise<void> {
    const child = this.child;
    if (!child || child.exitCode !== null) return;
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
    await new Promise((r) => child.once('exit', r));
    clearTimeout(timer);
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
