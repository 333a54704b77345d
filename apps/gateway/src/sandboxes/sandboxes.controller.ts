import { Body, Controller, Delete, Get, HttpCode, Param, Post, Query, Req } from '@nestjs/common';
import { ApiBearerAuth, ApiOperation, ApiTags } from '@nestjs/swagger';
import type { FastifyRequest } from 'fastify';
import { ExposePortRequest, SandboxSpec } from '#tern/contracts';
import { publicGatewayUrl } from '../machines/public-url.js';
import { CurrentPrincipal, type Principal } from '../auth/principal.js';
import { ListSandboxesQuery } from './dto/list-sandboxes.query.js';
import { SandboxesService } from './sandboxes.service.js';

@ApiTags('sandboxes')
@ApiBearerAuth()
@Controller('api/v1/sandboxes')
export class SandboxesController {
  constructor(private readonly sandboxes: SandboxesService) {}

  @Post()
  @ApiOperation({
    summary: 'Create a sandbox',
    description:
      'Places a container on a machine of the pool and answers 201 once it runs: `{id, state, machine, …}`. Its processes start in `workdir` (default /workspace, its writable directory). It ends after `timeout` s (default 300), after `idle_timeout` s without a call, on DELETE, or is reported lost with its machine. 503 when no machine can take it now.',
  })
  create(@CurrentPrincipal() p: Principal, @Body() spec: SandboxSpec) {
    return this.sandboxes.create(p, spec);
  }

  @Get()
  @ApiOperation({ summary: "The workspace's sandboxes, newest first: running ones, or all of the last 100 with live=false" })
  list(@CurrentPrincipal() p: Principal, @Query() q: ListSandboxesQuery) {
    return this.sandboxes.list(p, q.live ?? true);
  }

  @Get(':id')
  @ApiOperation({ summary: 'One sandbox: state (placing, running, terminated, failed, lost), machine, limits, timestamps' })
  get(@CurrentPrincipal() p: Principal, @Param('id') id: string) {
    return this.sandboxes.get(p, id);
  }

  @Delete(':id')
  @ApiOperation({ summary: 'Terminate the sandbox: its processes are killed, its container and files removed' })
  terminate(@CurrentPrincipal() p: Principal, @Param('id') id: string) {
    return this.sandboxes.terminate(p, id);
  }

  @Post(':id/ports')
  @ApiOperation({
    summary: 'Expose a port the sandbox listens on',
    description:
      'Answers `{port, url}`: requests to `<gateway>/sandbox/<id>/<port>/…` with the workspace token reach that port inside the sandbox, carried over NATS to its agent (the machine needs no inbound port). HTTP only.',
  })
  exposePort(@CurrentPrincipal() p: Principal, @Param('id') id: string, @Body() body: ExposePortRequest, @Req() req: FastifyRequest) {
    return this.sandboxes.exposePort(p, id, body.port, publicGatewayUrl(req.headers));
  }

  @Post(':id/keepalive')
  @HttpCode(200)
  @ApiOperation({ summary: 'Start the idle timeout again (every call does); 409 when the sandbox has ended' })
  keepalive(@CurrentPrincipal() p: Principal, @Param('id') id: string) {
    return this.sandboxes.keepalive(p, id);
  }
}
