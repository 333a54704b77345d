import { Body, Controller, Delete, Get, HttpCode, Param, Put } from '@nestjs/common';
import { ApiBearerAuth, ApiOperation, ApiTags } from '@nestjs/swagger';
import { CurrentPrincipal, type Principal } from '../auth/principal.js';
import { PutSecretDto, SecretNameParams } from './dto/secret.dto.js';
import { SecretsService } from './secrets.service.js';

@ApiTags('secrets')
@ApiBearerAuth()
@Controller('api/v1/secrets')
export class SecretsController {
  constructor(private readonly secrets: SecretsService) {}

  @Put(':name')
  @ApiOperation({ summary: 'Create or replace a secret of this workspace (sealed at rest; the value is never returned)' })
  put(@CurrentPrincipal() p: Principal, @Param() params: SecretNameParams, @Body() body: PutSecretDto) {
    return this.secrets.put(p.workspaceId, params.name, body.value);
  }

  @Get()
  @ApiOperation({ summary: "This workspace's secrets: names, sizes and dates, never values" })
  list(@CurrentPrincipal() p: Principal) {
    return this.secrets.list(p.workspaceId);
  }

  @Delete(':name')
  @HttpCode(204)
  @ApiOperation({ summary: 'Delete a secret' })
  async remove(@CurrentPrincipal() p: Principal, @Param() params: SecretNameParams): Promise<void> {
    await this.secrets.remove(p.workspaceId, params.name);
  }
}
