import { ApiProperty } from '@nestjs/swagger';
import { IsIn, IsISO8601, IsOptional, IsString, Length } from 'class-validator';
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

  @ApiProperty({
    example: '2026-12-31T00:00:00Z',
    description: 'When the token stops working (ISO 8601, in the future); without it the token lives until revoked.',
    required: false,
  })
  @IsOptional()
  @IsISO8601({ strict: true, strictSeparator: true }, { message: 'expiresAt must be an ISO 8601 date-time, e.g. 2026-12-31T00:00:00Z' })
  expiresAt?: string;
}
