// class-transformer's @Type reads design:type metadata: the Reflect polyfill must load first.
import 'reflect-metadata';
import { Type } from 'class-transformer';
import {
  Allow,
  ArrayMaxSize,
  ArrayMinSize,
  IsArray,
  IsBoolean,
  IsInt,
  IsISO8601,
  IsOptional,
  IsString,
  Min,
  ValidateNested,
} from 'class-validator';
import { defineContract } from '../contract.js';
import { IsId } from '../validation.js';

export class TaskCompleted {
  @IsId() taskId!: string;
  @IsId() deploymentId!: string;
  @IsId() workspaceId!: string;
  /** The version that runs it (absent in events from before task queues ran). */
  @IsOptional() @IsInt() @Min(1) deploymentVersion?: number;
  @IsId() containerId!: string;
  @IsId() machineId!: string;
  @IsInt() @Min(1) attempt!: number;
  @IsInt() @Min(0) durationMs!: number;
  /** The handler's JSON response; absent when it returned no body. */
  @IsOptional() @Allow() result?: unknown;
  /** Set instead of result when the result is over TASK_RESULT_INLINE_BYTES: its object name in the `results` store. */
  @IsOptional() @IsString() resultRef?: string;
  @IsISO8601() completedAt!: string;
  /**
   * True when no tern.task.started.v1 was sent for this attempt: it ended before its start was due
   * to be reported (TASK_START_REPORT_DELAY_MS in libs/tasks), so this completion stands for the
   * start too (the gateway checks the placement and records the lease with the result).
   */
  @IsOptional() @IsBoolean() withStart?: boolean;
}

export const TASK_COMPLETED = defineContract({
  subject: 'tern.task.*.completed.v1',
  kind: 'event',
  machineIdField: 'machineId',
  payload: TaskCompleted,
  stream: 'EVENTS',
  description:
    'A task finished successfully. Sent by the agent holding the lease of the attempt (Nats-Msg-Id = `<task id>:completed:<attempt>`, so a repeat is stored once while the completion of a later attempt is not taken for it); read by the gateway (stores the result, calls the callback; believed only from the lease holder of the attempt, one completion per task; with `withStart`, an attempt that ended before its start was reported, believed from a container placed for the task as a start is, and recorded as its start and result in one), which says what it accepted in tern.task.attempt-ended.v1 for metering and reputation.',
});

/** The most completions one task.completed-many carries (with results of at most 16 KiB each it stays well under NATS's 1 MiB). */
export const TASK_COMPLETED_MANY_MAX = 32;

/** Several attempts' completions from one machine, sent together (each as its own TaskCompleted would be). */
export class TaskCompletedMany {
  @IsId() machineId!: string;
  @IsArray()
  @ArrayMinSize(1)
  @ArrayMaxSize(TASK_COMPLETED_MANY_MAX)
  @ValidateNested({ each: true })
  @Type(() => TaskCompleted)
  completions!: TaskCompleted[];
}

export const TASK_COMPLETED_MANY = defineContract({
  subject: 'tern.task.*.completed-many.v1',
  kind: 'event',
  machineIdField: 'machineId',
  payload: TaskCompletedMany,
  stream: 'EVENTS',
  description:
    "Several completions of one machine's attempts in one message: those that ended while its previous task report was on its way (a bunch of map chunks, or tasks of several slots). Nats-Msg-Id `completed-many:<hash of the members' task ids and attempts>`, so a repeat is stored once. Read by the gateway, which judges each member as it judges a tern.task.*.completed.v1 (a member naming another machine than the message is refused) and acknowledges the message once every member is settled. An agent sends a lone completion as tern.task.*.completed.v1, which the gateway still reads.",
});
