import { ApiProperty } from '@nestjs/swagger';
import { Matches } from 'class-validator';
import type { CreatePoolRequest } from '#tern/contracts';
import { PoolRulesDto } from './pool-rules.js';

/** Pool names travel in URLs, CLI flags and the agent's config: kept to a safe alphabet. */
export const POOL_NAME = /^[a-z0-9][a-z0-9_-]{0,62}$/;

export class CreatePoolDto extends PoolRulesDto implements CreatePoolRequest {
  @ApiProperty({ example: 'h100-eu', description: 'Lower-case letters, digits, - and _, 1 to 63 characters.' })
  @Matches(POOL_NAME, { message: 'name must be 1-63 lower-case letters, digits, - or _, starting with a letter or digit' })
  name!: string;
}
