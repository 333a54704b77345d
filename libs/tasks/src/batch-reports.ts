import { createHash } from 'node:crypto';

/** The most bytes of result a completion may carry to travel with others in one task.completed-many. */
export const BATCHED_RESULT_MAX_BYTES = 16 * 1024;

/**
 * The Nats-Msg-Id of a message that tells several attempts at once (task.completed-many,
 * task.attempts-ended): `<kind>:` and a digest of its members' task ids and attempts, in order, so
 * that the same batch sent again is stored once, while a batch holding another attempt of a task is not
 * taken for it.
 */
export function batchMsgId(kind: string, members: readonly { taskId: string; attempt: number }[]): string {
  const digest = createHash('sha256');
  for (const m of members) digest.update(`${m.taskId}:${m.attempt}\n`);
  return `${kind}:${digest.digest('base64url')}`;
}
