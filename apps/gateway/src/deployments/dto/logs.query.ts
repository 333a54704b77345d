import { Transform } from 'class-transformer';
import { IsBoolean, IsInt, IsOptional, Max, Min } from 'class-validator';

const bool = ({ value }: { value: unknown }) =>
  value === 'true' || value === '1' ? true : value === 'false' || value === '0' ? false : value;

export class LogsQuery {
  /** Keep the stream open, picking up containers that start later. */
  @IsOptional() @Transform(bool) @IsBoolean({ message: 'follow must be true or false' }) follow?: boolean;
  /** End the stream after this many lines. */
  @IsOptional()
  @Transform(({ value }) => (typeof value === 'string' && /^\d+$/.test(value) ? Number(value) : value))
  @IsInt()
  @Min(1)
  @Max(100_000)
  tail?: number;
  /** Without follow: how long to listen, in seconds (lines are not stored centrally, only streamed). */
  @IsOptional()
  @Transform(({ value }) => (typeof value === 'string' && /^\d+$/.test(value) ? Number(value) : value))
  @IsInt()
  @Min(1)
  @Max(60)
  wait?: number;
}
