import { ApiProperty } from '@nestjs/swagger';
import { IsIn, IsOptional, IsString, Length } from 'class-validator';
import type { CreateTokenRequest } from '#tern/contracts';
import { API_TOKEN_ROLES, type ApiTokenRole } from '#tern/persistence';

export class CreateTokenDto implements CreateTokenRequest {
  @ApiProperty({ example: 'ci', description: 'A label to tell tokens apart.' })
  @IsString()
  @Length(1, 100)
  name!: string;

  @ApiProperty({ enum: API_TOKEN_ROLES, default: 'member', required: false })
  @IsOptional()
  @IsIn(API_TOKEN_ROLES)
  role?: ApiTokenRole;
}
