import { Body, Controller, Delete, Get, HttpCode, Param, ParseUUIDPipe, Post } from '@nestjs/common';
import { ApiBearerAuth, ApiOperation, ApiTags } from '@nestjs/swagger';
import { AdminOnly } from '../auth/admin-only.decorator.js';
import { CurrentPrincipal, type Principal } from '../auth/principal.js';
import { CreateTokenDto } from './dto/create-token.dto.js';
import { CreateWorkspaceDto } from './dto/create-workspace.dto.js';
import { WorkspacesService } from './workspaces.service.js';

@ApiTags('workspaces')
@ApiBearerAuth()
@Controller('api/v1')
export class WorkspacesController {
  constructor(private readonly workspaces: WorkspacesService) {}

  @Get('workspace')
  @ApiOperation({ summary: 'The workspace of the calling token' })
  async current(@CurrentPrincipal() p: Principal) {
    const w = await this.workspaces.get(p.workspaceId);
    return { id: w.id, name: w.name, createdAt: w.createdAt, role: p.role };
  }

  @Get('workspaces')
  @AdminOnly()
  @ApiOperation({ summary: 'All workspaces (admin)' })
  list() {
    return this.workspaces.list();
  }

  @Post('workspaces')
  @AdminOnly()
  @ApiOperation({ summary: 'Create a workspace and its first admin token, shown once (admin)' })
  create(@Body() body: CreateWorkspaceDto) {
    return this.workspaces.create(body.name);
  }

  @Get('tokens')
  @ApiOperation({ summary: 'Tokens of this workspace (secrets are never shown again)' })
  tokens(@CurrentPrincipal() p: Principal) {
    return this.workspaces.listTokens(p.workspaceId);
  }

  @Post('tokens')
  @AdminOnly()
  @ApiOperation({ summary: 'Create a token in this workspace; the secret is in the answer, once' })
  createToken(@CurrentPrincipal() p: Principal, @Body() body: CreateTokenDto) {
    return this.workspaces.createToken(p.workspaceId, body.name, body.role ?? 'member');
  }

  @Delete('tokens/:id')
  @AdminOnly()
  @HttpCode(204)
  @ApiOperation({ summary: 'Revoke a token' })
  revoke(@CurrentPrincipal() p: Principal, @Param('id', new ParseUUIDPipe()) id: string) {
    return this.workspaces.revokeToken(p.workspaceId, id);
  }
}
