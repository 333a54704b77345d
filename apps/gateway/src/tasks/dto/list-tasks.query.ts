import { Transform } from 'class-transformer';
import { IsIn, IsInt, IsOptional, IsString, Matches, Max, Min } from 'class-validator';
import { TASK_STATES, type TaskState } from '#tern/contracts';

const states = ({ value }: { value: unknown }) =>
  typeof value === 'string'
    ? value
        .split(',')
        .map((s) => s.trim().toUpperCase())
        .filter(Boolean)
    : value;

export class ListTasksQuery {
  /** A deployment name of the caller's workspace. */
  @IsOptional() @IsString() deployment?: string;
  /** One state or several, comma-separated (PENDING,RUNNING). */
  @IsOptional()
  @Transform(states)
  @IsIn(TASK_STATES, { each: true, message: `status must be one or more of ${TASK_STATES.join(', ')} (comma-separated)` })
  status?: TaskState[];
  @IsOptional()
  @Transform(({ value }) => (typeof value === 'string' && /^\d+$/.test(value) ? Number(value) : value))
  @IsInt({ message: 'limit must be a whole number' })
  @Min(1)
  @Max(500)
  limit?: number;
  /** The next_cursor of the previous page. */
  @IsOptional() @Matches(/^[A-Za-z0-9_-]+$/, { message: 'cursor must be the next_cursor of a previous page' }) cursor?: string;
}
