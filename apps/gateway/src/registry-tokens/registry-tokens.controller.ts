import { Controller, Get, Headers, Query } from '@nestjs/common';
import { ApiOperation, ApiTags } from '@nestjs/swagger';
import { REGISTRY_TOKEN_PATH } from '#tern/contracts';
import { Public } from '#tern/observability';
import { RegistryTokenQuery } from './dto/registry-token.query.js';
import { type RegistryTokenResponse, RegistryTokens } from './registry-tokens.service.js';

/** The registry's token realm: the API-token guard stands aside, the service tells the callers apart. */
@ApiTags('images')
@Public()
@Controller(REGISTRY_TOKEN_PATH)
export class RegistryTokensController {
  constructor(private readonly tokens: RegistryTokens) {}

  @Get()
  @ApiOperation({
    summary:
      'A short-lived registry token (Docker token auth) for the scopes asked: machines pull the images placed on them, builders and operators push',
  })
  issue(@Headers('authorization') authorization: string | undefined, @Query() query: RegistryTokenQuery): Promise<RegistryTokenResponse> {
    const scopes = query.scope === undefined ? [] : Array.isArray(query.scope) ? query.scope : [query.scope];
    return this.tokens.issue(authorization, query.service, scopes);
  }
}
