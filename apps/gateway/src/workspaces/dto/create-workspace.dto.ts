import { ApiProperty } from '@nestjs/swagger';
import { Matches } from 'class-validator';

export class CreateWorkspaceDto {
  @ApiProperty({ example: 'acme-ml', description: 'Lower-case letters, digits and -, 2 to 63 characters.' })
  @Matches(/^[a-z0-9][a-z0-9-]{1,62}$/, { message: 'name must be 2-63 lower-case letters, digits or -, starting with a letter or digit' })
  name!: string;
}
