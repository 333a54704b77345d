import { Transform } from 'class-transformer';
import { IsBoolean, IsInt, IsOptional, Max, Min } from 'class-validator';

export class ListSandboxesQuery {
  /** true (default): only sandboxes placing or running; false: ended ones too (newest 100). */
  @IsOptional()
  @Transform(({ value }) => (value === 'true' ? true : value === 'false' ? false : value))
  @IsBoolean({ message: 'live must be true or false' })
  live?: boolean;
}

export class CreateSandboxQuery {
  /** Seconds to hold the answer until the sandbox runs (201); past it, 202 with it placing. Default 60; 0 answers at once. */
  @IsOptional()
  @Transform(({ value }) => (typeof value === 'string' && /^\d+$/.test(value) ? Number(value) : value))
  @IsInt({ message: 'wait must be a whole number of seconds (0-60)' })
  @Min(0)
  @Max(60)
  wait?: number;
}
