import { Transform } from 'class-transformer';
import { IsInt, IsOptional, Max, Min } from 'class-validator';

export class WaitTaskQuery {
  /** Seconds to wait for the task to end before answering with its current state; default 30. */
  @IsOptional()
  @Transform(({ value }) => (typeof value === 'string' && /^\d+$/.test(value) ? Number(value) : value))
  @IsInt({ message: 'timeout must be a whole number of seconds' })
  @Min(0)
  @Max(300)
  timeout?: number;
}
