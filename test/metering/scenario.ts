import { randomBytes, randomUUID } from 'node:crypto';
import pg from 'pg';
import {
  CONTAINER_FAILED,
  CONTAINER_STARTED,
  CONTAINER_STOPPED,
  type Contract,
  type ContainerResources,
  TASK_ATTEMPT_ENDED,
  TASK_ATTEMPTS_ENDED,
  type TaskAttemptEnded,
  USAGE_INTERVAL,
} from '#tern/contracts';
import { type Messaging } from '#tern/messaging';
import { type TestSchema, testEnv } from '../support/isolation.js';
import { freePort, ServiceProcess } from '../support/processes.js';

/**
 * A made-up but realistic history of containers and tasks on two machines, as the agents, the
 * scheduler and (for task attempts it accepted under their leases) the gateway would publish it, with the lifetimes it stands for, so tests can compare what
 * metering wrote with the truth. Machine m-b makes half its tasks fail.
 */
export interface ScenarioContainer {
  id: string;
  machineId: string;
  deploymentId: string;
  workspaceId: string;
  resources: ContainerResources;
  /** Epoch ms, the true lifetime. */
  start: number;
  end: number;
  ending: 'stopped' | 'crashed' | 'machine-lost';
}

export interface ScenarioEvent {
  contract: Contract;
  payload: object;
  msgId: string;
}

export interface Scenario {
  containers: ScenarioContainer[];
  events: ScenarioEvent[];
  tasks: { completed: number; failed: number; seconds: number };
}

export const HEARTBEAT_TTL_SECONDS = 30;
const GIB = 2 ** 30;

/** A small deterministic generator, so a failing run can be reproduced from its seed. */
function rng(seed: number) {
  let s = seed >>> 0;
  return () => {
    s = (s * 1664525 + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

export function makeScenario(base: number, workspaces: [string, string], count = 16, seed = 7): Scenario {
  const random = rng(seed);
  const tag = randomBytes(3).toString('hex');
  const deployments = [
    {
      id: randomUUID(),
      workspaceId: workspaces[0],
      resources: { cpuMillicores: 2000, memoryBytes: 4 * GIB, gpuCount: 1, gpuType: 'H100' },
    },
    { id: randomUUID(), workspaceId: workspaces[1], resources: { cpuMillicores: 500, memoryBytes: GIB / 2, gpuCount: 0 } },
  ];
  const containers: ScenarioContainer[] = [];
  const events: ScenarioEvent[] = [];
  const tasks = { completed: 0, failed: 0, seconds: 0 };
  for (let i = 0; i < count; i++) {
    const d = deployments[i % 2];
    const machineId = i % 4 < 2 ? 'm-a' : 'm-b';
    // Spread over three hours, lifetimes from 20 s to 100 min, so many cross an hour boundary.
    const start = base + Math.floor(random() * 3 * 3_600_000);
    const end = start + 20_000 + Math.floor(random() * 100 * 60_000);
    const ending = i % 5 === 3 ? 'crashed' : i % 7 === 5 ? 'machine-lost' : 'stopped';
    const c: ScenarioContainer = {
      id: `c${i}-${tag}`,
      machineId,
      deploymentId: d.id,
      workspaceId: d.workspaceId,
      resources: d.resources,
      start,
      end,
      ending,
    };
    containers.push(c);
    const ids = { containerId: c.id, deploymentId: c.deploymentId, deploymentVersion: 1, workspaceId: c.workspaceId, machineId };
    const iso = (ms: number) => new Date(ms).toISOString();
    events.push({
      contract: CONTAINER_STARTED,
      payload: { ...ids, at: iso(start), resources: c.resources, startupLatencyMs: 300 },
      msgId: `${c.id}:started`,
    });
    if (ending === 'crashed') {
      events.push({
        contract: CONTAINER_FAILED,
        payload: { ...ids, at: iso(end), phase: 'runtime', error: 'exited with code 1' },
        msgId: `${c.id}:failed`,
      });
      // The agent drains the log before it reports the stop, so the stop says a little later.
      events.push({
        contract: CONTAINER_STOPPED,
        payload: { ...ids, at: iso(end + 2000), exitCode: 1, oomKilled: false, reason: 'exited' },
        msgId: `${c.id}:stopped`,
      });
    } else if (ending === 'machine-lost') {
      const lostAt = end + HEARTBEAT_TTL_SECONDS * 1000;
      events.push({
        contract: CONTAINER_FAILED,
        payload: { ...ids, at: iso(lostAt), phase: 'machine-lost', error: 'machine offline' },
        msgId: `${c.id}:failed:machine-lost`,
      });
    } else {
      events.push({
        contract: CONTAINER_STOPPED,
        payload: { ...ids, at: iso(end), exitCode: 0, oomKilled: false, reason: 'stop command: scale-down' },
        msgId: `${c.id}:stopped`,
      });
    }
    // A health-check failure neither starts nor ends usage: the stop that follows does.
    if (i === 0)
      events.push({
        contract: CONTAINER_FAILED,
        payload: { ...ids, at: iso(start + 5000), phase: 'health', error: 'no passing GET /health' },
        msgId: `${c.id}:failed:health`,
      });

    // Every other container's three attempts are told together (task.attempts-ended), as the gateway tells facts that are ready at once.
    const told: TaskAttemptEnded[] = [];
    for (let k = 0; k < 3; k++) {
      const taskId = `t${i}-${k}-${tag}`;
      const startedAt = start + 1000 + k * 3000;
      const durationMs = 500 + Math.floor(random() * 2000);
      const task = { taskId, deploymentId: c.deploymentId, workspaceId: c.workspaceId, containerId: c.id, machineId, attempt: 1 };
      const fails = machineId === 'm-b' && k % 2 === 0;
      const fact: TaskAttemptEnded = {
        ...task,
        ...(fails ? ({ outcome: 'failed', cause: 'error' } as const) : ({ outcome: 'completed' } as const)),
        startedAt: iso(startedAt),
        endedAt: iso(startedAt + durationMs),
        durationMs,
      };
      if (i % 2) told.push(fact);
      else events.push({ contract: TASK_ATTEMPT_ENDED, payload: fact, msgId: `${taskId}:ended:1` });
      if (fails) tasks.failed++;
      else tasks.completed++;
      tasks.seconds += durationMs / 1000;
    }
    if (told.length) events.push({ contract: TASK_ATTEMPTS_ENDED, payload: { attempts: told }, msgId: `${c.id}:attempts-ended` });
  }
  // Events of different kinds travel on different consumers: shuffle so that, among others,
  // some stops are seen before their starts.
  for (let i = events.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [events[i], events[j]] = [events[j], events[i]];
  }
  return { containers, events, tasks };
}

export async function publishAll(
  messaging: Messaging,
  events: readonly ScenarioEvent[],
  opts: { withMsgId?: boolean } = {},
): Promise<void> {
  for (const e of events) await messaging.publish(e.contract, e.payload, opts.withMsgId === false ? {} : { msgId: e.msgId });
}

/** The truth: seconds, GPU-, CPU-core- and GiB-seconds per key of a container, inside [from, to). */
export function expectedUsage(
  containers: readonly ScenarioContainer[],
  key: (c: ScenarioContainer) => string,
  from = -Infinity,
  to = Infinity,
) {
  const out = new Map<string, { seconds: number; gpuSeconds: number; cpuCoreSeconds: number; memoryGibSeconds: number }>();
  for (const c of containers) {
    const seconds = Math.max(0, Math.min(c.end, to) - Math.max(c.start, from)) / 1000;
    const t = out.get(key(c)) ?? { seconds: 0, gpuSeconds: 0, cpuCoreSeconds: 0, memoryGibSeconds: 0 };
    t.seconds += seconds;
    t.gpuSeconds += seconds * c.resources.gpuCount;
    t.cpuCoreSeconds += (seconds * c.resources.cpuMillicores) / 1000;
    t.memoryGibSeconds += (seconds * c.resources.memoryBytes) / GIB;
    out.set(key(c), t);
  }
  return out;
}

/**
 * What the scheduler recorded before any of these events: each container's placement (machine,
 * deployment version, workspace, reserved resources, a second before it started). Metering
 * charges from these, not from the events.
 */
export async function placeScenario(db: pg.Client, containers: readonly ScenarioContainer[]): Promise<void> {
  const versions = new Map<string, string>();
  for (const c of containers) {
    await db.query(`INSERT INTO machines (id, pool, state) VALUES ($1, 'default', 'ready') ON CONFLICT DO NOTHING`, [c.machineId]);
    let version = versions.get(c.deploymentId);
    if (!version) {
      await db.query(`INSERT INTO workspaces (id, name) VALUES ($1, $2) ON CONFLICT DO NOTHING`, [c.workspaceId, c.workspaceId]);
      await db.query(
        `INSERT INTO deployments (id, workspace_id, name, kind, state, latest_version) VALUES ($1, $2, $3, 'endpoint', 'ready', 1)`,
        [c.deploymentId, c.workspaceId, `d-${c.deploymentId}`],
      );
      version = (
        await db.query(`INSERT INTO deployment_versions (deployment_id, version, spec) VALUES ($1, 1, '{}') RETURNING id`, [c.deploymentId])
      ).rows[0].id as string;
      versions.set(c.deploymentId, version);
    }
    await db.query(
      `INSERT INTO containers (id, deployment_version_id, machine_id, state, requested, created_at) VALUES ($1, $2, $3, 'stopped', $4, $5)`,
      [c.id, version, c.machineId, JSON.stringify(c.resources), new Date(c.start - 1000)],
    );
  }
}

export async function schemaClient(schema: TestSchema): Promise<pg.Client> {
  const db = new pg.Client({ connectionString: schema.url, options: `-c search_path=${schema.schema}` });
  await db.connect();
  return db;
}

/** How far metering got: closed usage seconds and finished task attempts. */
export async function progress(db: pg.Client): Promise<{ closedSeconds: number; finishedTasks: number; containers: number }> {
  const { rows } = await db.query(
    `SELECT (SELECT COALESCE(SUM(seconds), 0)::float8 FROM usage_intervals WHERE closed) AS "closedSeconds",
            (SELECT COUNT(*)::int FROM metered_tasks WHERE outcome <> 'running') AS "finishedTasks",
            (SELECT COUNT(*)::int FROM metered_containers WHERE started_at IS NOT NULL AND ended_at IS NOT NULL) AS containers`,
  );
  return rows[0];
}

/** Every usage row and task row, in a stable order, for comparing two schemas. */
export async function ledger(db: pg.Client) {
  const usage = await db.query(
    `SELECT event_id, container_id, machine_id, workspace_id, deployment_id, gpu_type, gpu_count, cpu_millicores, memory_bytes::float8 AS memory_bytes,
            period_start, period_end, seconds, closed FROM usage_intervals ORDER BY event_id`,
  );
  const tasks = await db.query(
    `SELECT task_id, attempt, outcome, cause, duration_ms::float8 AS duration_ms, container_id, machine_id, ended_at FROM metered_tasks ORDER BY task_id, attempt`,
  );
  return { usage: usage.rows, tasks: tasks.rows };
}

/**
 * The usage intervals metering announced on EVENTS, reduced as the contract tells readers to:
 * per eventId, the message with the earliest periodEnd (then periodStart). Returns seconds by eventId.
 */
export async function announcedIntervals(messaging: Messaging): Promise<Map<string, number>> {
  const consumer = await messaging.js.consumers.get(messaging.ns.stream('EVENTS'), { filter_subjects: messaging.subject(USAGE_INTERVAL) });
  const best = new Map<string, { periodEnd: string; periodStart: string; seconds: number }>();
  for (;;) {
    let seen = 0;
    for await (const m of await consumer.fetch({ max_messages: 500, expires: 1000 })) {
      seen++;
      const u = m.json<{ eventId: string; periodStart: string; periodEnd: string; seconds: number }>();
      const held = best.get(u.eventId);
      if (!held || u.periodEnd < held.periodEnd || (u.periodEnd === held.periodEnd && u.periodStart < held.periodStart))
        best.set(u.eventId, u);
    }
    if (!seen) break;
  }
  return new Map([...best].filter(([, u]) => u.seconds > 0).map(([id, u]) => [id, u.seconds]));
}

/** Metering's progress once it wrote every container and task attempt of the scenario, to the microsecond; else undefined. */
export async function appliedAll(db: pg.Client, { containers, tasks }: Pick<Scenario, 'containers' | 'tasks'>) {
  const expectedSeconds = containers.reduce((sum, c) => sum + (c.end - c.start) / 1000, 0);
  const p = await progress(db);
  return p.containers === containers.length &&
    p.finishedTasks === tasks.completed + tasks.failed &&
    Math.abs(p.closedSeconds - expectedSeconds) < 1e-6
    ? p
    : undefined;
}

/** A metering process as these tests run it (checkpoints every 200 ms), `extra` laid over its environment; resolves once ready. */
export async function startMetering(schema: TestSchema, namespace: string, extra: Record<string, string> = {}): Promise<ServiceProcess> {
  const env = testEnv(schema, namespace, {
    HTTP_PORT: String(await freePort()),
    METERING_CHECKPOINT_INTERVAL_MS: '200',
    MACHINE_HEARTBEAT_TTL_SECONDS: String(HEARTBEAT_TTL_SECONDS),
    ...extra,
  });
  const p = new ServiceProcess('metering', env).start();
  await p.ready();
  return p;
}
