import { Transform } from 'class-transformer';
import { IsBoolean, IsIn, IsInt, IsOptional, Max, Min } from 'class-validator';
import { PickType } from '@nestjs/swagger';
import { SubmitTaskQuery } from '../../tasks/dto/submit-task.query.js';

const int = ({ value }: { value: unknown }) => (typeof value === 'string' && /^\d+$/.test(value) ? Number(value) : value);
const bool = ({ value }: { value: unknown }) =>
  value === 'true' || value === '1' ? true : value === 'false' || value === '0' ? false : value;

/** Inputs one chunk may hold: a chunk is one task, and its payload stays under the task payload limit. */
export const MAX_CHUNK_SIZE = 10_000;

/** How a map runs (the body is its inputs: a JSON array, or NDJSON with one input per line); max_retries and timeout apply to each chunk. */
export class StartMapQuery extends PickType(SubmitTaskQuery, ['max_retries', 'timeout'] as const) {
  /** Inputs per task (default 1): the handler is called once per input inside the container. */
  @IsOptional()
  @Transform(int)
  @IsInt({ message: 'chunk_size must be a whole number' })
  @Min(1, { message: 'chunk_size must be at least 1' })
  @Max(MAX_CHUNK_SIZE, { message: `chunk_size must be at most ${MAX_CHUNK_SIZE}` })
  chunk_size?: number;
  /** true: a failed input's error is kept in its place; false (default): the first failure fails the map and cancels what has not started. */
  @IsOptional() @Transform(bool) @IsBoolean({ message: 'return_exceptions must be true or false' }) return_exceptions?: boolean;
  /** Order of /results: input (default; each line once all before it are out) or completion. */
  @IsOptional() @IsIn(['input', 'completion'], { message: 'order must be input or completion' }) order?: 'input' | 'completion';
}

export class MapResultsQuery {
  /** Lines already received: a client that reconnects passes how many it has, and gets the rest once each. */
  @IsOptional() @Transform(int) @IsInt({ message: 'from must be a whole number of lines' }) @Min(0) from?: number;
}
