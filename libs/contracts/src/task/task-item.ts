import { IsInt, IsISO8601, IsObject, Min } from 'class-validator';
import { defineContract } from '../contract.js';
import { IsId } from '../validation.js';

export class TaskItem {
  @IsId() taskId!: string;
  @IsId() deploymentId!: string;
  @IsId() workspaceId!: string;
  /** The caller's input, passed to the handler as the body of POST /. */
  @IsObject() payload!: Record<string, unknown>;
  /**
   * 1 when first enqueued; a task re-enqueued after its container was lost carries the next
   * attempt. Redeliveries of this same message are counted by JetStream's delivery count.
   */
  @IsInt() @Min(1) attempt!: number;
  /** Retries after the first attempt; the consumer's max deliveries is maxRetries + 1. */
  @IsInt() @Min(0) maxRetries!: number;
  /** Ack wait of the consumer: a task silent (no progress) for longer is redelivered. */
  @IsInt() @Min(1) timeoutSeconds!: number;
  @IsISO8601() enqueuedAt!: string;
}

export const TASK_ITEM = defineContract({
  subject: 'tern.tasks.*.v1',
  kind: 'command',
  payload: TaskItem,
  stream: 'TASKS',
  description:
    "A task waiting to run. Token: deployment id. Sent by the gateway (Nats-Msg-Id = task id, so a retried submit is stored once); pulled by the agents running that deployment's containers, acked when the task completed or failed for good.",
});
