import { MAX_TASK_RETRIES, RESULTS_BUCKET, TASK_ITEM, subjectFor, taskConsumerName, taskResultName } from '#tern/contracts';
import type { ConsumerSpec, Messaging } from './messaging.js';

/**
 * How long a pulled task may go without a sign of life before JetStream hands it to another
 * agent. The agent signals progress (working) every third of it while the task runs, so only a
 * dead agent or a lost machine lets it lapse: it bounds how fast a lost task is retried, not
 * how long a task may run (that is its timeout, enforced by the agent).
 */
export const TASK_ACK_WAIT_MS = 30_000;

/**
 * The durable pull consumer of one task-queue version, declared alike by the gateway (first
 * submit) and the scheduler (before it starts a container of the version): creating it twice
 * is harmless. Agents only pull from it. Deliveries are bounded
 * per task by the agent (maxRetries + 1 attempts; the one after is recorded as lost and
 * dropped), since a task may override its queue's retries; the consumer's own bound is a
 * backstop above the highest allowed.
 */
export function taskConsumerSpec(deploymentId: string, version: number): ConsumerSpec {
  return {
    stream: 'TASKS',
    durable: taskConsumerName(deploymentId, version),
    filterSubject: subjectFor(TASK_ITEM, deploymentId, String(version)),
    ackWaitMs: TASK_ACK_WAIT_MS,
    maxDeliver: MAX_TASK_RETRIES + 2,
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
