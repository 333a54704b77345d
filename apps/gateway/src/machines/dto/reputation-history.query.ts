import { ApiProperty } from '@nestjs/swagger';
import { Transform } from 'class-transformer';
import { IsInt, IsISO8601, IsOptional, Max, Min } from 'class-validator';

export class ReputationHistoryQuery {
  @ApiProperty({
    required: false,
    example: '2026-01-01T00:00:00Z',
    description: 'Only history rows computed at or after this moment (ISO 8601).',
  })
  @IsOptional()
  @IsISO8601({}, { message: 'from must be an ISO 8601 date, e.g. 2026-01-01T00:00:00Z' })
  from?: string;

  @ApiProperty({ required: false, example: 100, description: 'At most this many history rows, newest first (1 to 1000, default 100).' })
  @IsOptional()
  @Transform(({ value }) => (typeof value === 'string' && /^\d+$/.test(value) ? Number(value) : value))
  @IsInt({ message: 'limit must be a whole number from 1 to 1000' })
  @Min(1, { message: 'limit must be a whole number from 1 to 1000' })
  @Max(1000, { message: 'limit must be a whole number from 1 to 1000' })
  limit?: number;
}
