import { IsDefined, IsInt, IsISO8601, IsOptional, Max, Min } from 'class-validator';
import { defineContract } from '../contract.js';
import { MAX_TASK_RETRIES } from '../deployment/task-policy.js';
import { IsId } from '../validation.js';

/** The marker a map chunk's task payload carries: the runner calls the handler once per input. */
export const MAP_CHUNK_KEY = '__tern_map_chunk__';

/**
 * The key of a bunch of tasks sent to a runner in one call (`{"__tern_map_bunch__": [{task_id,
 * attempt, payload}, …]}`); the runner answers one NDJSON line per task, in turn, as each ends.
 * Named for map chunks, the first tasks bunched; a runner saying RUNNER_BUNCHES_PLAIN takes plain
 * payloads in it too.
 */
export const MAP_BUNCH_KEY = '__tern_map_bunch__';

/** The header a runner's answers to task calls carry when it takes bunches: RUNNER_BUNCHES_CHUNKS or RUNNER_BUNCHES_PLAIN. */
export const RUNNER_BUNCHES_HEADER = 'x-tern-bunches';
/** A runner that takes bunches of map chunks only (Tern's runners before plain tasks were bunched). */
export const RUNNER_BUNCHES_CHUNKS = '1';
/** A runner that takes bunches of map chunks and of plain task payloads alike. */
export const RUNNER_BUNCHES_PLAIN = '2';

export class TaskItem {
  @IsId() taskId!: string;
  @IsId() deploymentId!: string;
  @IsInt() @Min(1) deploymentVersion!: number;
  @IsId() workspaceId!: string;
  /** The caller's input, any JSON value but null, passed to the handler as the body of POST /. */
  @IsDefined() payload!: unknown;
  /** Retries after the first attempt: the task runs at most maxRetries + 1 times (JetStream's delivery count is the attempt). */
  @IsInt() @Min(0) @Max(MAX_TASK_RETRIES) maxRetries!: number;
  /** Longest one attempt may run; the agent stops it then (cause timeout). */
  @IsInt() @Min(1) timeoutSeconds!: number;
  /** A first attempt not started by then is dropped (the gateway marks the task EXPIRED). */
  @IsOptional() @IsISO8601() expiresAt?: string;
  @IsISO8601() enqueuedAt!: string;
}

/** A saved task as TASKS carries it (expiresAt from its ttl), from the gateway's submit and the scheduler's tick alike. */
export function taskItemOf(task: {
  id: string;
  deploymentId: string;
  version: number;
  workspaceId: string;
  payload: unknown;
  maxRetries: number;
  timeoutSeconds: number;
  ttlSeconds: number | null;
  createdAt: Date;
}): TaskItem {
  return {
    taskId: task.id,
    deploymentId: task.deploymentId,
    deploymentVersion: task.version,
    workspaceId: task.workspaceId,
    payload: task.payload,
    maxRetries: task.maxRetries,
    timeoutSeconds: task.timeoutSeconds,
    ...(task.ttlSeconds ? { expiresAt: new Date(task.createdAt.getTime() + task.ttlSeconds * 1000).toISOString() } : {}),
    enqueuedAt: new Date().toISOString(),
  };
}

export const TASK_ITEM = defineContract({
  subject: 'tern.tasks.*.*.v1',
  kind: 'command',
  payload: TaskItem,
  stream: 'TASKS',
  description:
    "A task waiting to run. Tokens: deployment id, version. Sent by the gateway, and by the scheduler for a schedule's tick (Nats-Msg-Id = task id, so a retried submit is stored once); pulled through the durable consumer of that version (`taskConsumerName`) by the agents running its containers, one pull per free worker; acked when the task completed or failed for good, nak'd with a back-off to retry.",
});

/** The durable pull consumer that hands out one task-queue version's tasks (shared by every agent). */
export function taskConsumerName(deploymentId: string, version: number): string {
  return `tasks-${deploymentId}-v${version}`;
}
