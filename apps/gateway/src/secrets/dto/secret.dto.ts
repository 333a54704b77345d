import { ApiProperty } from '@nestjs/swagger';
import { IsString, Matches, MaxLength, MinLength } from 'class-validator';
import { SECRET_NAME, SECRET_NAME_RULE } from '#tern/contracts';

export class SecretNameParams {
  @ApiProperty({ example: 'team_registry', description: SECRET_NAME_RULE })
  @Matches(SECRET_NAME, { message: `name must be ${SECRET_NAME_RULE}` })
  name!: string;
}

export class PutSecretDto {
  @ApiProperty({ description: 'The value (for registry credentials: <username>:<password>); never returned' })
  @IsString()
  @MinLength(1, { message: 'value must not be empty' })
  @MaxLength(16384, { message: 'value must be at most 16384 characters' })
  value!: string;
}

export class AgentContainerParams {
  @Matches(/^[A-Za-z0-9_.-]{1,128}$/, { message: 'containerId must be a container id' }) containerId!: string;
}
