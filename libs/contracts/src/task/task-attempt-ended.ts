// class-transformer's @Type reads design:type metadata: the Reflect polyfill must load first.
import 'reflect-metadata';
import { Type } from 'class-transformer';
import { ArrayMaxSize, ArrayMinSize, IsArray, IsIn, IsInt, IsISO8601, IsOptional, Min, ValidateNested } from 'class-validator';
import { defineContract } from '../contract.js';
import { IsId } from '../validation.js';
import { TASK_FAILURE_CAUSES, type TaskFailureCause } from './task-failed.js';

export const TASK_ATTEMPT_OUTCOMES = ['completed', 'failed'] as const;
export type TaskAttemptOutcome = (typeof TASK_ATTEMPT_OUTCOMES)[number];

/**
 * An attempt's outcome as the control plane accepted it: who held its lease and what it was
 * doing (from the tasks table, not the agent's payload) and when, bounded by what the control
 * plane observed.
 */
export class TaskAttemptEnded {
  @IsId() taskId!: string;
  @IsInt() @Min(1) attempt!: number;
  @IsId() workspaceId!: string;
  @IsId() deploymentId!: string;
  /** The machine that held the attempt's lease (for a lost attempt, the one that lost it). */
  @IsId() machineId!: string;
  @IsOptional() @IsId() containerId?: string;
  @IsIn(TASK_ATTEMPT_OUTCOMES) outcome!: TaskAttemptOutcome;
  /** Why a failed attempt failed. */
  @IsOptional() @IsIn(TASK_FAILURE_CAUSES) cause?: TaskFailureCause;
  /** When the control plane saw the attempt start (its task.started reached NATS): the lease. */
  @IsOptional() @IsISO8601() startedAt?: string;
  /** The agent's end, never later than when its outcome reached NATS nor earlier than startedAt. */
  @IsISO8601() endedAt!: string;
  /** The agent's duration, at most endedAt - startedAt; absent for a lost attempt (nothing observed ran). */
  @IsOptional() @IsInt() @Min(0) durationMs?: number;
}

export const TASK_ATTEMPT_ENDED = defineContract({
  subject: 'tern.task.attempt-ended.v1',
  kind: 'event',
  payload: TaskAttemptEnded,
  stream: 'EVENTS',
  description:
    "An attempt's outcome the gateway accepted from the holder of the attempt's lease (or a lost attempt it declared when the next one started), with the lease's machine, container, workspace and deployment from the tasks table and its times bounded by what the control plane observed. Nats-Msg-Id `<task id>:ended:<attempt>`. Read by metering (task usage) and reputation (task outcomes) instead of the agents' own task events.",
});

/** The most attempts one task.attempts-ended carries. */
export const TASK_ATTEMPTS_ENDED_MAX = 256;

/** Several attempts' outcomes the gateway accepted, told together (each as its own TaskAttemptEnded would be). */
export class TaskAttemptsEnded {
  @IsArray()
  @ArrayMinSize(1)
  @ArrayMaxSize(TASK_ATTEMPTS_ENDED_MAX)
  @ValidateNested({ each: true })
  @Type(() => TaskAttemptEnded)
  attempts!: TaskAttemptEnded[];
}

export const TASK_ATTEMPTS_ENDED = defineContract({
  subject: 'tern.task.attempts-ended.v1',
  kind: 'event',
  payload: TaskAttemptsEnded,
  stream: 'EVENTS',
  description:
    "Several attempts' outcomes the gateway accepted, each as tern.task.attempt-ended.v1 says one: the facts that were ready while the gateway's previous one was on its way, in one message (Nats-Msg-Id `attempts-ended:<hash of the members' task ids and attempts>`). A lone fact still goes as tern.task.attempt-ended.v1. Read by metering and reputation, which apply each member under the same guards as a lone one (an attempt counted once, whichever message told it).",
});
