import { IsInt, IsOptional, IsString, Min } from 'class-validator';
import { defineContract } from '../contract.js';
import { IsId } from '../validation.js';

export class TaskCancel {
  @IsId() taskId!: string;
  /** The attempt the machine holds the lease of, when the gateway knew it. */
  @IsOptional() @IsInt() @Min(1) attempt?: number;
  @IsOptional() @IsString() reason?: string;
}

export const AGENT_TASK_CANCEL = defineContract({
  subject: 'tern.agent.*.task.cancel.v1',
  kind: 'event',
  payload: TaskCancel,
  description:
    "Stop a task this machine runs. Token: machine id. Sent by the gateway, on a user's cancel, to the machine that holds the lease of the task's current attempt (nobody else hears it); the agent stops the attempt and remembers the id, so a cancel that overtakes its delivery still wins. Core NATS: a lost one leaves the attempt to finish, and its outcome is ignored since the task is final.",
});
