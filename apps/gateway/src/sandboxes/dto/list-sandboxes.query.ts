import { Transform } from 'class-transformer';
import { IsBoolean, IsOptional } from 'class-validator';

export class ListSandboxesQuery {
  /** true (default): only sandboxes placing or running; false: ended ones too (newest 100). */
  @IsOptional()
  @Transform(({ value }) => (value === 'true' ? true : value === 'false' ? false : value))
  @IsBoolean({ message: 'live must be true or false' })
  live?: boolean;
}
