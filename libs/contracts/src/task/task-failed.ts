import { IsBoolean, IsIn, IsInt, IsISO8601, IsOptional, IsString, Min } from 'class-validator';
import { defineContract } from '../contract.js';
import { IsId } from '../validation.js';

/** error: the handler failed; timeout: no progress within timeoutSeconds; container-lost: the container or its machine died mid-task. */
export const TASK_FAILURE_CAUSES = ['error', 'timeout', 'container-lost'] as const;
export type TaskFailureCause = (typeof TASK_FAILURE_CAUSES)[number];

/** Where a task's error gives way to the handler's own traceback, when its runner sent one (the CLI and SDKs split on it). */
export const REMOTE_TRACEBACK = '\n\nRemote traceback:\n';

export class TaskFailed {
  @IsId() taskId!: string;
  @IsId() deploymentId!: string;
  @IsId() workspaceId!: string;
  /** The version that runs it (absent in events from before task queues ran). */
  @IsOptional() @IsInt() @Min(1) deploymentVersion?: number;
  /** Absent when the attempt's container is not known. */
  @IsOptional() @IsId() containerId?: string;
  /** The machine that reports it (the subject's machine token); the gateway reports a lost attempt naming the machine that lost it. */
  @IsId() machineId!: string;
  @IsInt() @Min(1) attempt!: number;
  @IsIn(TASK_FAILURE_CAUSES) cause!: TaskFailureCause;
  @IsString() error!: string;
  /** false: this was the last attempt and the task is failed for good. */
  @IsBoolean() willRetry!: boolean;
  @IsOptional() @IsInt() @Min(0) durationMs?: number;
  @IsISO8601() failedAt!: string;
}

export const TASK_FAILED = defineContract({
  subject: 'tern.task.*.failed.v1',
  kind: 'event',
  machineIdField: 'machineId',
  payload: TaskFailed,
  stream: 'EVENTS',
  description:
    'An attempt of a task failed. Sent by the agent (cause container-lost when it is handed a redelivered task whose previous attempt never reported); read by the gateway (status; final when willRetry is false; believed only from the lease holder), which says what it accepted in tern.task.attempt-ended.v1 for metering and reputation.',
});
