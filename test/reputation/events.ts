import { randomUUID } from 'node:crypto';
import {
  CONTAINER_READY,
  MACHINE_HEARTBEAT,
  MACHINE_NETWORK_TESTED,
  MACHINE_STATE_CHANGED,
  type MachineState,
  machineStateChangedMsgId,
  REPUTATION_BUCKET,
  REPUTATION_BUCKET_TTL_MS,
  type ReputationEntry,
  TASK_COMPLETED,
  TASK_FAILED,
} from '#tern/contracts';
import { type Messaging } from '#tern/messaging';

/**
 * The events the reputation service learns from, published as their real senders do (the
 * scheduler's state changes, the agent's network test, container and task events).
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

  /** A live heartbeat, as the agent sends it (sequence gaps are beats it skipped). */
  async heartbeat(machineId: string, pool: string, sequence: number) {
    await this.messaging.publish(
      MACHINE_HEARTBEAT,
      { machineId, pool, sentAt: new Date().toISOString(), sequence, cpuPercent: 5, memoryPercent: 10, gpus: [], runningContainers: [] },
      { tokens: [machineId], msgId: `${machineId}-test-${sequence}` },
    );
  }

  async containerReady(machineId: string, deploymentId: string, readyLatencyMs = 1500): Promise<string> {
    const containerId = `c-${randomUUID()}`;
    await this.messaging.publish(CONTAINER_READY, {
      containerId,
      deploymentId,
      deploymentVersion: 1,
      workspaceId: this.workspaceId,
      machineId,
      at: new Date().toISOString(),
      readyLatencyMs,
    });
    return containerId;
  }

  /** `count` task attempts of a deployment on a machine; every `failEvery`-th fails with a handler error (0: none). */
  async tasks(machineId: string, deploymentId: string, containerId: string, count: number, failEvery: number) {
    for (let i = 0; i < count; i++) {
      const base = { taskId: `t-${randomUUID()}`, deploymentId, workspaceId: this.workspaceId, containerId, machineId, attempt: 1 };
      const at = new Date().toISOString();
      if (failEvery > 0 && i % failEvery === 0) {
        await this.messaging.publish(TASK_FAILED, {
          ...base,
          cause: 'error',
          error: 'ValueError: boom',
          willRetry: false,
          durationMs: 20,
          failedAt: at,
        });
      } else {
        await this.messaging.publish(
          TASK_COMPLETED,
          { ...base, durationMs: 20, result: { ok: true }, completedAt: at },
          { msgId: base.taskId },
        );
      }
    }
  }
}

/** The machine's entry in the reputation KV bucket, if any. */
export async function reputationEntry(messaging: Messaging, machineId: string): Promise<ReputationEntry | undefined> {
  const kv = await messaging.kv({ name: REPUTATION_BUCKET.name, ttlMs: REPUTATION_BUCKET_TTL_MS });
  const e = await kv.get(machineId);
  return e && e.operation === 'PUT' && e.length > 0 ? e.json<ReputationEntry>() : undefined;
}
