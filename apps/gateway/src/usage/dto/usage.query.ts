import { ApiPropertyOptional } from '@nestjs/swagger';
import { Type } from 'class-transformer';
import { IsIn, IsISO8601, IsNumber, IsOptional, Matches, Min } from 'class-validator';
import { ID_PATTERN, USAGE_GRANULARITIES, USAGE_GROUPS, type UsageGranularity, type UsageGroup } from '#tern/contracts';

export { USAGE_GRANULARITIES, USAGE_GROUPS, type UsageGranularity, type UsageGroup } from '#tern/contracts';
export const USAGE_FORMATS = ['json', 'csv'] as const;

const ISO = { strict: true, strictSeparator: true };

/** The window every usage question is asked about; both ends optional (default: the last 24 h). */
export class UsageWindowQuery {
  @ApiPropertyOptional({
    example: '2026-01-01T00:00:00Z',
    description: 'Start of the window (ISO 8601, inclusive); default: 24 h before `to`.',
  })
  @IsOptional()
  @IsISO8601(ISO, { message: 'from must be an ISO 8601 date or date-time, e.g. 2026-01-01 or 2026-01-01T00:00:00Z' })
  from?: string;

  @ApiPropertyOptional({ example: '2026-01-02T00:00:00Z', description: 'End of the window (ISO 8601, exclusive); default: now.' })
  @IsOptional()
  @IsISO8601(ISO, { message: 'to must be an ISO 8601 date or date-time, e.g. 2026-01-02 or 2026-01-02T00:00:00Z' })
  to?: string;

  @ApiPropertyOptional({ enum: USAGE_FORMATS, description: 'csv answers text/csv (so does Accept: text/csv).' })
  @IsOptional()
  @IsIn(USAGE_FORMATS, { message: `format must be one of ${USAGE_FORMATS.join(', ')}` })
  format?: (typeof USAGE_FORMATS)[number];
}

export class UsageQuery extends UsageWindowQuery {
  @ApiPropertyOptional({ enum: USAGE_GROUPS, default: 'workspace' })
  @IsOptional()
  @IsIn(USAGE_GROUPS, { message: `group_by must be one of ${USAGE_GROUPS.join(', ')}` })
  group_by?: UsageGroup;

  @ApiPropertyOptional({
    enum: USAGE_GRANULARITIES,
    description: 'One row per group and hour or day (UTC); without it, one row per group for the whole window.',
  })
  @IsOptional()
  @IsIn(USAGE_GRANULARITIES, { message: `granularity must be one of ${USAGE_GRANULARITIES.join(', ')}` })
  granularity?: UsageGranularity;

  @ApiPropertyOptional({ description: "Only this workspace's usage (admin; a member token always sees its own workspace only)." })
  @IsOptional()
  @Matches(ID_PATTERN, { message: 'workspace must be a workspace id' })
  workspace?: string;
}

export class RewardsQuery extends UsageWindowQuery {
  @ApiPropertyOptional({ example: 1000, description: 'An amount to distribute; each machine gets share × amount.' })
  @IsOptional()
  @Type(() => Number)
  @IsNumber({ allowNaN: false, allowInfinity: false }, { message: 'amount must be a number' })
  @Min(0, { message: 'amount must be at least 0' })
  amount?: number;
}
