import { Transform } from 'class-transformer';
import { IsInt, IsOptional, IsString, Max, Min } from 'class-validator';

export class TaskStatsQuery {
  /** A deployment name of the caller's workspace; default every deployment. */
  @IsOptional() @IsString() deployment?: string;
  /** The window, in minutes back from now (one point per minute); default 60. */
  @IsOptional()
  @Transform(({ value }) => (typeof value === 'string' && /^\d+$/.test(value) ? Number(value) : value))
  @IsInt({ message: 'minutes must be a whole number' })
  @Min(1)
  @Max(1440)
  minutes?: number;
}
