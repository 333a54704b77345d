import { Transform } from 'class-transformer';
import { IsInt, IsOptional, Max, Min } from 'class-validator';

/** A time series' window: the last `minutes` (default 60, at most a day). */
export class WindowQuery {
  @IsOptional()
  @Transform(({ value }) => (typeof value === 'string' && /^\d+$/.test(value) ? Number(value) : value))
  @IsInt({ message: 'minutes must be a whole number' })
  @Min(1)
  @Max(1440)
  minutes?: number;
}
