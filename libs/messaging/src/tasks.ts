import { RESULTS_BUCKET, TASK_ITEM, subjectFor, taskConsumerName, taskResultName } from '#tern/contracts';
import { TASK_ACK_WAIT_MS, TASK_MAX_DELIVER } from '#tern/tasks';
import type { ConsumerSpec, Messaging } from './messaging.js';

/**
 * The durable pull consumer of one task-queue version, declared alike by the gateway (first
 * submit) and the scheduler (before it starts a container of the version): creating it twice
 * is harmless. Agents only pull from it. Its ack wait is the lease of a pulled task and its
 * bound on deliveries a backstop: each task's own bound is its retry policy's (libs/tasks).
 */
export function taskConsumerSpec(deploymentId: string, version: number): ConsumerSpec {
  return {
    stream: 'TASKS',
    durable: taskConsumerName(deploymentId, version),
    filterSubject: subjectFor(TASK_ITEM, deploymentId, String(version)),
    ackWaitMs: TASK_ACK_WAIT_MS,
    maxDeliver: TASK_MAX_DELIVER,
    maxAckPending: 10_000,
    deliver: 'all',
  };
}

/**
 * Keeps the result of one attempt of a task, too large for its row, once. Answers its object
 * name, or undefined when that attempt's result is stored already (the first write stands).
 */
export async function putTaskResult(messaging: Messaging, taskId: string, attempt: number, json: Uint8Array): Promise<string | undefined> {
  const store = await messaging.objectStore({ name: RESULTS_BUCKET.name });
  const name = taskResultName(taskId, attempt);
  if (await store.info(name)) return undefined;
  await store.putBlob({ name }, json);
  return name;
}

/** A result kept by putTaskResult, parsed; undefined when it is no longer there. */
export async function getTaskResult(messaging: Messaging, ref: string): Promise<unknown> {
  const store = await messaging.objectStore({ name: RESULTS_BUCKET.name });
  const bytes = await store.getBlob(ref);
  return bytes ? (JSON.parse(Buffer.from(bytes).toString('utf8')) as unknown) : undefined;
}

/** A large task result's bytes as stored (spot checks compare them); undefined once gone. */
export async function getTaskResultBytes(messaging: Messaging, ref: string): Promise<Uint8Array | undefined> {
  const store = await messaging.objectStore({ name: RESULTS_BUCKET.name });
  return (await store.getBlob(ref)) ?? undefined;
}
