import { Body, Controller, Delete, Get, HttpCode, Param, Post, Query, Req } from '@nestjs/common';
import { ApiBearerAuth, ApiOperation, ApiQuery, ApiTags } from '@nestjs/swagger';
import type { FastifyRequest } from 'fastify';
import { CurrentPrincipal, type Principal } from '../auth/principal.js';
import { OperatorOnly } from '../auth/roles.decorator.js';
import { CreateMachineDto } from './dto/create-machine.dto.js';
import { ListMachinesQuery } from './dto/list-machines.query.js';
import { MachineTokenRotationService } from './machine-token-rotation.service.js';
import { ReputationHistoryQuery } from './dto/reputation-history.query.js';
import { MachinesService } from './machines.service.js';
import { publicGatewayUrl } from './public-url.js';

@ApiTags('machines')
@ApiBearerAuth()
@Controller('api/v1/machines')
export class MachinesController {
  constructor(
    private readonly machines: MachinesService,
    private readonly tokens: MachineTokenRotationService,
  ) {}

  @Post()
  @OperatorOnly()
  @ApiOperation({ summary: 'Create a pending machine and its one-time join token, with the tern-agent init line to run on it (operator)' })
  create(@Body() body: CreateMachineDto, @Req() request: FastifyRequest) {
    return this.machines.create(body.pool, body.machineId, publicGatewayUrl(request.headers));
  }

  @Get()
  @ApiOperation({
    summary:
      'Machines with state, hardware, current use and last heartbeat (a workspace token: only the machines its work ran on, without their network interfaces)',
  })
  @ApiQuery({ name: 'pool', required: false })
  @ApiQuery({ name: 'state', required: false })
  list(@CurrentPrincipal() p: Principal, @Query() query: ListMachinesQuery) {
    return this.machines.list(p, query);
  }

  @Get(':id')
  @ApiOperation({ summary: 'One machine in full: inventory, state reason, network test, last heartbeat' })
  get(@CurrentPrincipal() p: Principal, @Param('id') id: string) {
    return this.machines.get(p, id);
  }

  @Get(':id/reputation')
  @ApiOperation({ summary: "A machine's reputation: current score, its components, and the stored history (newest first; from, limit)" })
  reputation(@CurrentPrincipal() p: Principal, @Param('id') id: string, @Query() query: ReputationHistoryQuery) {
    return this.machines.reputationOf(p, id, query.from ? new Date(query.from) : undefined, query.limit ?? 100);
  }

  @Get(':id/state-changes')
  @ApiOperation({
    summary: 'The states a machine entered (pending, registered, ready, unschedulable, offline) with why, newest first (from, limit)',
  })
  stateChanges(@CurrentPrincipal() p: Principal, @Param('id') id: string, @Query() query: ReputationHistoryQuery) {
    return this.machines.stateChangesOf(p, id, query.from ? new Date(query.from) : undefined, query.limit ?? 100);
  }

  @Post(':id/revoke')
  @OperatorOnly()
  @HttpCode(204)
  @ApiOperation({
    summary: 'Cut a machine off: its machine token stops working and its NATS user is revoked, closing its connections at once (operator)',
  })
  async revoke(@Param('id') id: string) {
    await this.machines.revoke(id);
  }

  @Post(':id/rotate-token')
  @OperatorOnly()
  @HttpCode(200)
  @ApiOperation({
    summary: "Replace a registered machine's token; the old one stops working at once, the new one is shown once (operator)",
  })
  rotateToken(@Param('id') id: string) {
    return this.tokens.rotateByOperator(id);
  }

  @Delete(':id')
  @OperatorOnly()
  @HttpCode(204)
  @ApiOperation({ summary: 'Remove a machine; its join and machine tokens stop working (operator)' })
  async remove(@Param('id') id: string) {
    await this.machines.remove(id);
  }
}
