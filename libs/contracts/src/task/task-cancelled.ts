import { IsISO8601, IsOptional, IsString } from 'class-validator';
import { defineContract } from '../contract.js';
import { IsId } from '../validation.js';

export class TaskCancelled {
  @IsId() taskId!: string;
  @IsId() deploymentId!: string;
  @IsId() workspaceId!: string;
  @IsOptional() @IsString() reason?: string;
  @IsISO8601() cancelledAt!: string;
}

export const TASK_CANCELLED = defineContract({
  subject: 'tern.task.cancelled.v1',
  kind: 'event',
  payload: TaskCancelled,
  stream: 'EVENTS',
  description:
    'A user cancelled a task. Sent by the gateway; read by agents (drop it if queued, interrupt it if running) and the autoscaler (backlog shrinks).',
});
