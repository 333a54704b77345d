import { randomUUID } from 'node:crypto';
import {
  CONTAINER_READY,
  CONTAINER_SCHEDULED,
  MACHINE_BEAT,
  MACHINE_NETWORK_TESTED,
  MACHINE_STATE_CHANGED,
  type MachineState,
  machineStateChangedMsgId,
  REPUTATION_BUCKET,
  REPUTATION_BUCKET_TTL_MS,
  type ReputationEntry,
  TASK_ATTEMPT_ENDED,
} from '#tern/contracts';
import { type Messaging } from '#tern/messaging';

/**
 * The events the reputation service learns from, published as their real senders do (the
 * scheduler's state changes and start commands, the agent's network test and container events,
 * the gateway's account of the task attempts it accepted).
 */
export class MachineEvents {
  constructor(
    private readonly messaging: Messaging,
    readonly workspaceId: string = randomUUID(),
  ) {}

  async joined(machineId: string, pool: string, at: Date) {
    const changedAt = at.toISOString();
    await this.messaging.publish(
      MACHINE_STATE_CHANGED,
      { machineId, pool, from: 'registered', to: 'ready', reason: 'first heartbeat', changedAt },
      { msgId: machineStateChangedMsgId({ machineId, to: 'ready', changedAt }) },
    );
    await this.messaging.publish(MACHINE_NETWORK_TESTED, {
      machineId,
      nats: { throughputMbps: 900, latencyMs: 4 },
      http: { throughputMbps: 800, latencyMs: 6 },
      testedAt: changedAt,
    });
  }

  async stateChanged(machineId: string, pool: string, to: MachineState, at: Date) {
    const changedAt = at.toISOString();
    await this.messaging.publish(
      MACHINE_STATE_CHANGED,
      { machineId, pool, from: null, to, reason: 'test', changedAt },
      { msgId: machineStateChangedMsgId({ machineId, to, changedAt }) },
    );
  }

  /** A live heartbeat, as the agent sends it: core NATS, heard by whoever listens now (sequence gaps are beats it skipped). */
  async heartbeat(machineId: string, pool: string, sequence: number) {
    this.messaging.emit(
      MACHINE_BEAT,
      { machineId, pool, sentAt: new Date().toISOString(), sequence, cpuPercent: 5, memoryPercent: 10, gpus: [], runningContainers: [] },
      [machineId],
    );
    await this.messaging.nc.flush();
  }

  /** The scheduler's start command (placement), then, `readyLatencyMs` later, the agent's ready. */
  async containerReady(machineId: string, deploymentId: string, readyLatencyMs = 1500): Promise<string> {
    const [containerId] = await this.containersReady([[machineId, deploymentId]], readyLatencyMs);
    return containerId;
  }

  /**
   * Containers started together: every start command, then `readyLatencyMs` later every ready,
   * so their start latencies (measured by reputation between the two reaching NATS) are alike.
   */
  async containersReady(starts: [machineId: string, deploymentId: string][], readyLatencyMs = 1500): Promise<string[]> {
    const all = starts.map(([machineId, deploymentId]) => ({
      containerId: `c-${randomUUID()}`,
      deploymentId,
      deploymentVersion: 1,
      workspaceId: this.workspaceId,
      machineId,
    }));
    for (const ids of all) await this.scheduled(ids);
    await new Promise((r) => setTimeout(r, readyLatencyMs));
    for (const ids of all) await this.messaging.publish(CONTAINER_READY, { ...ids, at: new Date().toISOString(), readyLatencyMs });
    return all.map((ids) => ids.containerId);
  }

  /** The scheduler placed a container and sends its start command. */
  async scheduled(ids: { containerId: string; deploymentId: string; deploymentVersion: number; workspaceId: string; machineId: string }) {
    const resources = { cpuMillicores: 1000, memoryBytes: 2 ** 30, gpuCount: 0 };
    await this.messaging.publish(CONTAINER_SCHEDULED, { ...ids, at: new Date().toISOString(), resources, reason: 'scale-up' });
  }

  /** `count` task attempts of a deployment on a machine; every `failEvery`-th fails with a handler error (0: none). */
  async tasks(machineId: string, deploymentId: string, containerId: string, count: number, failEvery: number) {
    for (let i = 0; i < count; i++) {
      const base = { taskId: `t-${randomUUID()}`, deploymentId, workspaceId: this.workspaceId, containerId, machineId, attempt: 1 };
      const at = new Date().toISOString();
      const failed = failEvery > 0 && i % failEvery === 0;
      await this.messaging.publish(
        TASK_ATTEMPT_ENDED,
        {
          ...base,
          ...(failed ? ({ outcome: 'failed', cause: 'error' } as const) : ({ outcome: 'completed' } as const)),
          startedAt: at,
          endedAt: at,
          durationMs: 0,
        },
        { msgId: `${base.taskId}:ended:1` },
      );
    }
  }
}

/** The machine's entry in the reputation KV bucket, if any. */
export async function reputationEntry(messaging: Messaging, machineId: string): Promise<ReputationEntry | undefined> {
  const kv = await messaging.kv({ name: REPUTATION_BUCKET.name, ttlMs: REPUTATION_BUCKET_TTL_MS });
  const e = await kv.get(machineId);
  return e && e.operation === 'PUT' && e.length > 0 ? e.json<ReputationEntry>() : undefined;
}
