import { IsBoolean, IsInt, IsISO8601, IsOptional, IsString, Min } from 'class-validator';
import { defineContract } from '../contract.js';
import { IsId } from '../validation.js';

export class TaskCancelled {
  @IsId() taskId!: string;
  @IsId() deploymentId!: string;
  @IsId() workspaceId!: string;
  @IsOptional() @IsInt() @Min(1) deploymentVersion?: number;
  /** Whether it was running when cancelled (the agent running it stops it). */
  @IsOptional() @IsBoolean() wasRunning?: boolean;
  @IsOptional() @IsString() reason?: string;
  @IsISO8601() cancelledAt!: string;
}

export const TASK_CANCELLED = defineContract({
  subject: 'tern.task.cancelled.*.v1',
  kind: 'event',
  payload: TaskCancelled,
  stream: 'EVENTS',
  description:
    'A user cancelled a task. Token: the workspace id. Sent by the gateway after it marked the task CANCELLED and deleted its TASKS message (the machine running it hears tern.agent.<machine id>.task.cancel.v1); a fact for integrators and the event history.',
});
