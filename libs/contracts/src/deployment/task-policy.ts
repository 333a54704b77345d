import { ArrayMaxSize, IsArray, IsInt, IsOptional, Matches, Max, Min } from 'class-validator';

/** The most retries a task may ask for; the TASKS consumers allow this many + 2 deliveries as a backstop. */
export const MAX_TASK_RETRIES = 10;
/** The largest task payload (JSON) the gateway accepts: it travels inside one JetStream message. */
export const TASK_PAYLOAD_MAX_BYTES = 512 * 1024;
/** Results up to this size are kept in the task's row; larger ones in the `results` object store. */
export const TASK_RESULT_INLINE_BYTES = 256 * 1024;
/** The largest result kept; a bigger one fails the attempt with a clear error. */
export const TASK_RESULT_MAX_BYTES = 16 * 1024 * 1024;
/** A task queue's default bound on tasks waiting (PENDING or RETRY); 429 beyond it. */
export const DEFAULT_MAX_PENDING_TASKS = 10_000;
export const DEFAULT_TASK_RETRIES = 3;

/** A task queue's task policy (Beam's TaskPolicy); a submit may override each field for its task. */
export class SpecTaskPolicy {
  /** Attempts after the first, after a handler error, a timeout or a lost container; default 3. */
  @IsOptional() @IsInt() @Min(0) @Max(MAX_TASK_RETRIES) max_retries?: number;
  /** Seconds one attempt may run before it is stopped (TIMEOUT); default the spec's timeout (3600). */
  @IsOptional() @IsInt() @Min(1) @Max(86400) timeout?: number;
  /** Seconds a task may wait before its first attempt starts; it is EXPIRED after. Default: no limit. */
  @IsOptional() @IsInt() @Min(1) @Max(14 * 86400) ttl?: number;
  /**
   * Error types whose failures are not retried (`[ValueError, KeyError]`): the handler's
   * exception class or any it derives from, by name. A tern.HTTPError with a 4xx status is never retried.
   */
  @IsOptional()
  @IsArray()
  @ArrayMaxSize(32)
  @Matches(/^[A-Za-z_$][\w$]*(\.[A-Za-z_$][\w$]*)*$/, {
    each: true,
    message: 'task_policy.no_retry_on must list error type names (ValueError, mymodule.BadInput)',
  })
  no_retry_on?: string[];
}

/** A task policy with every default filled. */
export interface ResolvedTaskPolicy {
  readonly maxRetries: number;
  readonly timeoutSeconds: number;
  readonly ttlSeconds?: number;
  readonly maxPendingTasks: number;
  readonly callbackUrl?: string;
  /** Error type names not retried (absent: every error is, up to maxRetries). */
  readonly noRetryOn?: readonly string[];
}
