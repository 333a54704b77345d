import { Transform } from 'class-transformer';
import { IsInt, IsOptional, Max, Min } from 'class-validator';
import { SubmitTaskQuery } from '../../tasks/dto/submit-task.query.js';

/** The longest a call may hold its HTTP request open; past it the caller gets 202 and polls. */
export const MAX_CALL_WAIT_SECONDS = 300;
export const DEFAULT_CALL_WAIT_SECONDS = 60;

/** A call's task-policy overrides (as for a task) and how long to hold the request for its result. */
export class CallFunctionQuery extends SubmitTaskQuery {
  /** Seconds to wait for the result before answering 202 {call_id}; default 60, at most 300; 0 answers at once. */
  @IsOptional()
  @Transform(({ value }) => (typeof value === 'string' && /^\d+$/.test(value) ? Number(value) : value))
  @IsInt({ message: 'wait must be a whole number of seconds' })
  @Min(0)
  @Max(MAX_CALL_WAIT_SECONDS, {
    message: `wait must be at most ${MAX_CALL_WAIT_SECONDS} seconds: poll GET /api/v1/calls/<id>/wait for longer calls`,
  })
  wait?: number;
}
