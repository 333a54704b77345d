import { IsIn, IsISO8601 } from 'class-validator';
import { defineContract } from '../contract.js';
import { FINAL_TASK_STATES, type TaskState } from '../domain.js';
import { IsId } from '../validation.js';

export class TaskEnded {
  @IsId() taskId!: string;
  @IsId() workspaceId!: string;
  @IsIn(FINAL_TASK_STATES) state!: TaskState;
  @IsISO8601() endedAt!: string;
}

export const TASK_ENDED = defineContract({
  subject: 'tern.notify.task-ended.*.v1',
  kind: 'event',
  payload: TaskEnded,
  description:
    "A task reached its final state in Postgres (the row is written before this is sent). Token: the workspace id (an integrator of the workspace hears how its tasks ended). Sent by the gateway replica that recorded it; read (core NATS, no queue group) by every gateway replica, which answers the callers waiting on GET /api/v1/tasks/<id>/wait (the sender has told its own waiters in-process, and drops its echo, marked with its Tern-Origin header, unread). Not stored: a missed one is caught by the waiters' periodic re-read.",
});
