import { Body, Controller, Delete, Get, HttpCode, Param, ParseUUIDPipe, Post, Query } from '@nestjs/common';
import { ApiBearerAuth, ApiOperation, ApiTags } from '@nestjs/swagger';
import { WorkspaceAdminOnly } from '../auth/roles.decorator.js';
import { CurrentPrincipal, type Principal } from '../auth/principal.js';
import { CreateNatsUserDto } from './dto/create-nats-user.dto.js';
import { ListNatsUsersQuery } from './dto/list-nats-users.query.js';
import { NatsUsersService } from './nats-users.service.js';

@ApiTags('nats')
@ApiBearerAuth()
@Controller('api/v1/nats/users')
export class NatsUsersController {
  constructor(private readonly users: NatsUsersService) {}

  @Post()
  @WorkspaceAdminOnly()
  @ApiOperation({
    summary:
      "Issue an integrator a NATS user JWT for its public key, scoped to one workspace's task events and/or task submission (workspace admin for its own, operator for any)",
  })
  create(@CurrentPrincipal() p: Principal, @Body() body: CreateNatsUserDto) {
    return this.users.create(p, body);
  }

  @Get()
  @WorkspaceAdminOnly()
  @ApiOperation({ summary: "A workspace's integrator NATS users, revoked ones included" })
  list(@CurrentPrincipal() p: Principal, @Query() query: ListNatsUsersQuery) {
    return this.users.list(p, query.workspace);
  }

  @Delete(':id')
  @WorkspaceAdminOnly()
  @HttpCode(204)
  @ApiOperation({ summary: "Revoke an integrator's NATS user at once (the account's revocation list)" })
  revoke(@CurrentPrincipal() p: Principal, @Param('id', new ParseUUIDPipe()) id: string) {
    return this.users.revoke(p, id);
  }
}
