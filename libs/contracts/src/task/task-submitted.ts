import { IsInt, IsISO8601, IsOptional, IsUrl, Min } from 'class-validator';
import { defineContract } from '../contract.js';
import { IsId } from '../validation.js';

export class TaskSubmitted {
  @IsId() taskId!: string;
  @IsId() deploymentId!: string;
  @IsId() workspaceId!: string;
  /** The version that runs it (absent in events from before task queues ran). */
  @IsOptional() @IsInt() @Min(1) deploymentVersion?: number;
  @IsInt() @Min(0) maxRetries!: number;
  @IsInt() @Min(1) timeoutSeconds!: number;
  /** Where the gateway POSTs the result when the task ends. */
  @IsOptional() @IsUrl({ require_tld: false }) callbackUrl?: string;
  /** Seconds it may wait before its first attempt; absent: no limit. */
  @IsOptional() @IsInt() @Min(1) ttlSeconds?: number;
  @IsISO8601() submittedAt!: string;
}

export const TASK_SUBMITTED = defineContract({
  subject: 'tern.task.submitted.*.v1',
  kind: 'event',
  payload: TaskSubmitted,
  stream: 'EVENTS',
  description:
    'A task was accepted and enqueued on TASKS. Token: the workspace id (an integrator of the workspace hears its own). Sent by the gateway; read by the autoscaler (new backlog: scale from zero without waiting for the tick).',
});
