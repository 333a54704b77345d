import { IsInt, IsISO8601, IsOptional, Min } from 'class-validator';
import { defineContract } from '../contract.js';
import { IsId } from '../validation.js';

export class TaskStarted {
  @IsId() taskId!: string;
  @IsId() deploymentId!: string;
  @IsId() workspaceId!: string;
  /** The version that runs it (absent in events from before task queues ran). */
  @IsOptional() @IsInt() @Min(1) deploymentVersion?: number;
  @IsId() containerId!: string;
  @IsId() machineId!: string;
  @IsInt() @Min(1) attempt!: number;
  @IsISO8601() startedAt!: string;
}

export const TASK_STARTED = defineContract({
  subject: 'tern.task.*.started.v1',
  kind: 'event',
  machineIdField: 'machineId',
  payload: TaskStarted,
  stream: 'EVENTS',
  description:
    "A container began running a task (one per attempt). Sent by the agent that pulled it; read by the gateway (task status and the attempt's lease, dated when it reached NATS); metering and reputation hear attempts only through the gateway's tern.task.attempt-ended.v1.",
});
