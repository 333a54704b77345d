import { Body, Controller, Delete, Get, HttpCode, Param, ParseUUIDPipe, Post } from '@nestjs/common';
import { ApiBearerAuth, ApiOperation, ApiTags } from '@nestjs/swagger';
import { OperatorOnly, WorkspaceAdminOnly } from '../auth/roles.decorator.js';
import { CurrentPrincipal, type Principal } from '../auth/principal.js';
import { CreateTokenDto } from './dto/create-token.dto.js';
import { CreateWorkspaceDto } from './dto/create-workspace.dto.js';
import { WorkspaceDeletion } from './workspace-deletion.service.js';
import { WorkspacesService } from './workspaces.service.js';

@ApiTags('workspaces')
@ApiBearerAuth()
@Controller('api/v1')
export class WorkspacesController {
  constructor(
    private readonly workspaces: WorkspacesService,
    private readonly deletion: WorkspaceDeletion,
  ) {}

  @Get('workspace')
  @ApiOperation({ summary: 'The workspace of the calling token' })
  async current(@CurrentPrincipal() p: Principal) {
    const w = await this.workspaces.get(p.workspaceId);
    return { id: w.id, name: w.name, createdAt: w.createdAt, role: p.role };
  }

  @Get('workspaces')
  @OperatorOnly()
  @ApiOperation({ summary: 'All workspaces (operator)' })
  list() {
    return this.workspaces.list();
  }

  @Post('workspaces')
  @OperatorOnly()
  @ApiOperation({ summary: 'Create a workspace and its first admin token (a workspace admin, nothing more), shown once (operator)' })
  create(@Body() body: CreateWorkspaceDto) {
    return this.workspaces.create(body.name);
  }

  @Delete('workspaces/:id')
  @OperatorOnly()
  @ApiOperation({
    summary:
      "Delete a workspace and what it holds (operator): tokens and NATS users revoked, deployments deleted (containers wind down, unfinished tasks cancelled), live sandboxes terminated, secrets destroyed, volumes and its registry builds deleted; its usage is kept. 409 for the default workspace, the caller's own, or one holding an operator token",
  })
  remove(@CurrentPrincipal() p: Principal, @Param('id', new ParseUUIDPipe()) id: string) {
    return this.deletion.delete(p, id);
  }

  @Get('tokens')
  @ApiOperation({ summary: 'Tokens of this workspace (secrets are never shown again)' })
  tokens(@CurrentPrincipal() p: Principal) {
    return this.workspaces.listTokens(p.workspaceId);
  }

  @Post('tokens')
  @WorkspaceAdminOnly()
  @ApiOperation({
    summary:
      'Create a token in this workspace (admin or member; operator only from an operator token), optionally expiring; the secret is in the answer, once',
  })
  createToken(@CurrentPrincipal() p: Principal, @Body() body: CreateTokenDto) {
    return this.workspaces.createToken(p, body.name, body.role ?? 'member', body.expiresAt);
  }

  @Delete('tokens/:id')
  @WorkspaceAdminOnly()
  @HttpCode(204)
  @ApiOperation({ summary: 'Revoke a token' })
  revoke(@CurrentPrincipal() p: Principal, @Param('id', new ParseUUIDPipe()) id: string) {
    return this.workspaces.revokeToken(p, id);
  }
}
