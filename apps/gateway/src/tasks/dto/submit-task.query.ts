import { Transform } from 'class-transformer';
import { IsInt, IsOptional, IsUrl, Max, Min } from 'class-validator';
import { MAX_TASK_RETRIES } from '#tern/contracts';

const int = ({ value }: { value: unknown }) => (typeof value === 'string' && /^\d+$/.test(value) ? Number(value) : value);

/** Per-task overrides of the queue's task policy, as query parameters (the body is the payload itself). */
export class SubmitTaskQuery {
  @IsOptional()
  @Transform(int)
  @IsInt({ message: 'max_retries must be a whole number' })
  @Min(0)
  @Max(MAX_TASK_RETRIES)
  max_retries?: number;
  /** Seconds one attempt may run. */
  @IsOptional() @Transform(int) @IsInt({ message: 'timeout must be a whole number of seconds' }) @Min(1) @Max(86400) timeout?: number;
  /** Seconds the task may wait before its first attempt. */
  @IsOptional() @Transform(int) @IsInt({ message: 'ttl must be a whole number of seconds' }) @Min(1) @Max(14 * 86400) ttl?: number;
  @IsOptional()
  @IsUrl({ require_tld: false, protocols: ['http', 'https'] }, { message: 'callback_url must be an http(s) URL' })
  callback_url?: string;
}
