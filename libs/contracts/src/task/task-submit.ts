import { IsIn, IsInt, IsObject, IsOptional, IsString, IsUrl, Max, Min, MinLength } from 'class-validator';
import { defineContract } from '../contract.js';
import { MAX_TASK_RETRIES } from '../deployment/task-policy.js';
import { IsId } from '../validation.js';

/** A task submitted over NATS: what POST /taskqueue/<name> takes, as one message. */
export class TaskSubmit {
  /** The task queue's name in the workspace. */
  @IsString() @MinLength(1) queue!: string;
  /** A version of the queue; absent: its latest. */
  @IsOptional() @IsInt() @Min(1) version?: number;
  /** The handler's input; absent: `{}`. */
  @IsOptional() @IsObject() payload?: Record<string, unknown>;
  @IsOptional() @IsInt() @Min(0) @Max(MAX_TASK_RETRIES) maxRetries?: number;
  /** Longest one attempt may run (at most a day); absent: the queue's task_policy. */
  @IsOptional() @IsInt() @Min(1) @Max(86_400) timeoutSeconds?: number;
  /** Longest it may wait for its first attempt (at most 14 days); absent: the queue's task_policy. */
  @IsOptional() @IsInt() @Min(1) @Max(14 * 86_400) ttlSeconds?: number;
  /** Where the gateway POSTs the result (a public http(s) address). */
  @IsOptional() @IsUrl({ require_tld: false, protocols: ['http', 'https'] }) callbackUrl?: string;
}

export class TaskSubmitReply {
  @IsId() taskId!: string;
  @IsIn(['PENDING']) status!: 'PENDING';
  @IsString() queue!: string;
  @IsInt() @Min(1) version!: number;
}

export const TASK_SUBMIT = defineContract({
  subject: 'tern.workspace.*.task.submit.v1',
  kind: 'request',
  payload: TaskSubmit,
  reply: TaskSubmitReply,
  description:
    "Submit a task to a task queue of a workspace over NATS, the integrators' door (the same checks and limits as POST /taskqueue/<name>). Token: the workspace id, the only workspace the request may name a queue of. Sent by integrators (`tern nats user create --allow submit`); answered by the gateway (queue group) once the task is saved; errors come back as a Tern-Error header with an HTTP-like code (404 unknown queue, 400 bad input, 429 too many waiting).",
});
