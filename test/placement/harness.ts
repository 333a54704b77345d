import type pg from 'pg';
import type { Subscription } from '@nats-io/transport-node';
import {
  AGENT_CONTAINER_START,
  AGENT_CONTAINER_STOP,
  CONTAINER_READY,
  CONTAINER_STARTED,
  CONTAINER_STOPPED,
  type ContainerStart,
  type ResolvedSpec,
  ROUTES_BUCKET,
  type RouteRecord,
  SCALE_COMMAND,
} from '#tern/contracts';
import { type Messaging } from '#tern/messaging';
import { insertDeployment } from '../support/rows.js';

export const GiB = 2 ** 30;

/** A resolved spec as the gateway stores it in deployment_versions.spec. */
export function spec(over: Partial<ResolvedSpec> = {}): ResolvedSpec {
  return {
    name: 'llm',
    kind: 'endpoint',
    image: 'host',
    handler: 'app.py:predict',
    code: `sha256:${'a'.repeat(64)}`,
    cpuMillicores: 1000,
    memoryBytes: GiB,
    gpuTypes: [],
    gpuCount: 0,
    workers: 2,
    concurrentRequests: 3,
    keepWarmSeconds: 180,
    timeoutSeconds: 180,
    autoscaler: { type: 'queue_depth', minContainers: 0, maxContainers: 10, tasksPerContainer: 6 },
    env: { MODEL: 'tiny' },
    volumes: [],
    pool: 'default',
    ...over,
  };
}

/**
 * An agent that only answers: accepts every start (unless told to refuse) and reports the
 * container started and ready at once, and stopped when told to stop.
 */
export class FakeAgent {
  readonly starts: ContainerStart[] = [];
  readonly stops: string[] = [];
  refuse?: string;
  private readonly subs: Subscription[] = [];

  constructor(
    readonly machineId: string,
    private readonly messaging: Messaging,
  ) {
    this.subs.push(
      messaging.serve(
        AGENT_CONTAINER_START,
        `agent-${machineId}`,
        (cmd) => {
          if (this.refuse) return { accepted: false, reason: this.refuse };
          this.starts.push(cmd);
          this.announceUp(cmd).catch(() => undefined);
          return { accepted: true };
        },
        [machineId],
      ),
      messaging.serve(
        AGENT_CONTAINER_STOP,
        `agent-${machineId}`,
        (cmd) => {
          this.stops.push(cmd.containerId);
          const start = this.starts.find((s) => s.containerId === cmd.containerId);
          if (start) {
            this.messaging
              .publish(CONTAINER_STOPPED, { ...this.event(start), exitCode: 0, oomKilled: false, reason: cmd.reason })
              .catch(() => undefined);
          }
          return { accepted: true };
        },
        [machineId],
      ),
    );
  }

  private event(cmd: ContainerStart) {
    return {
      containerId: cmd.containerId,
      deploymentId: cmd.deploymentId,
      deploymentVersion: cmd.deploymentVersion,
      workspaceId: cmd.workspaceId,
      machineId: this.machineId,
      at: new Date().toISOString(),
    };
  }

  private async announceUp(cmd: ContainerStart) {
    await this.messaging.publish(CONTAINER_STARTED, { ...this.event(cmd), resources: cmd.resources, startupLatencyMs: 5 });
    await this.messaging.publish(CONTAINER_READY, { ...this.event(cmd), readyLatencyMs: 10 });
  }

  close() {
    this.subs.forEach((s) => s.unsubscribe());
  }
}

export async function addMachine(
  db: pg.Client,
  id: string,
  opts: { pool?: string; cpus?: number; memoryGiB?: number; gpus?: string[] } = {},
) {
  const gpus = (opts.gpus ?? []).map((model, index) => ({ index, model, memoryBytes: 80 * GiB }));
  await db.query(
    `INSERT INTO machines (id, pool, state, cpu_threads, memory_bytes, gpus, last_heartbeat_at) VALUES ($1, $2, 'ready', $3, $4, $5::jsonb, now() + interval '1 hour')`,
    [id, opts.pool ?? 'default', opts.cpus ?? 4, (opts.memoryGiB ?? 8) * GiB, JSON.stringify(gpus)],
  );
}

/** A ready deployment with one version of `s`, as the gateway writes it; its id. */
export async function readyDeployment(db: pg.Client, workspaceId: string, name: string, s: ResolvedSpec): Promise<string> {
  return (await insertDeployment(db, { workspaceId, name, state: 'ready', spec: s })).deploymentId;
}

/** The autoscaler's command: `desired` containers of version 1. */
export function scaleTo(messaging: Messaging, deploymentId: string, desired: number) {
  return messaging.publish(
    SCALE_COMMAND,
    { deploymentId, deploymentVersion: 1, desired, reason: 'test', idleContainers: [], issuedAt: new Date().toISOString() },
    { tokens: [deploymentId] },
  );
}

/** The routes of a deployment's ready containers in the routes bucket. */
export async function routesOf(messaging: Messaging, deploymentId: string): Promise<RouteRecord[]> {
  const kv = await messaging.kv({ name: ROUTES_BUCKET.name });
  const out: RouteRecord[] = [];
  for await (const key of await kv.keys()) {
    const e = await kv.get(key);
    if (e && e.operation === 'PUT' && e.json<RouteRecord>().deploymentId === deploymentId) out.push(e.json<RouteRecord>());
  }
  return out;
}
