import { Body, Controller, Delete, Get, HttpCode, Param, Post, Query, Req, Res } from '@nestjs/common';
import { ApiBearerAuth, ApiOperation, ApiProduces, ApiTags } from '@nestjs/swagger';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { DeploymentSpec } from '#tern/contracts';
import { CurrentPrincipal, type Principal } from '../auth/principal.js';
import { publicGatewayUrl } from '../machines/public-url.js';
import { DeploymentLogsService } from './deployment-logs.service.js';
import { DeploymentsService } from './deployments.service.js';
import { LogsQuery } from './dto/logs.query.js';
import { WindowQuery } from './dto/window.query.js';

/** Deployments of the caller's workspace (the token decides which). */
@ApiTags('deployments')
@ApiBearerAuth()
@Controller('api/v1/deployments')
export class DeploymentsController {
  constructor(
    private readonly deployments: DeploymentsService,
    private readonly logs: DeploymentLogsService,
  ) {}

  @Post()
  @ApiOperation({ summary: 'Deploy a spec: a new immutable version of the named deployment (created on first deploy)' })
  deploy(@CurrentPrincipal() principal: Principal, @Body() spec: DeploymentSpec, @Req() req: FastifyRequest) {
    return this.deployments.deploy(principal, spec, publicGatewayUrl(req.headers));
  }

  @Get()
  @ApiOperation({ summary: 'Every deployment with its latest version, state, desired and actual containers' })
  list(@CurrentPrincipal() principal: Principal, @Req() req: FastifyRequest) {
    return this.deployments.list(principal, publicGatewayUrl(req.headers));
  }

  @Get(':name')
  @ApiOperation({ summary: 'One deployment: latest spec, versions, live containers' })
  get(@CurrentPrincipal() principal: Principal, @Param('name') name: string, @Req() req: FastifyRequest) {
    return this.deployments.get(principal, name, publicGatewayUrl(req.headers));
  }

  @Get(':name/scale-events')
  @ApiOperation({
    summary:
      'Scale history over the last `minutes` (default 60): every change of desired containers with its reason, and desired vs ready over time',
  })
  scaleEvents(@CurrentPrincipal() principal: Principal, @Param('name') name: string, @Query() q: WindowQuery) {
    return this.deployments.scaleHistory(principal, name, q.minutes ?? 60);
  }

  @Get(':name/requests')
  @ApiOperation({
    summary:
      'Endpoint requests per minute over the last `minutes` (default 60): count, 5xx, latency p50/p95/p99, every version and gateway summed',
  })
  requests(@CurrentPrincipal() principal: Principal, @Param('name') name: string, @Query() q: WindowQuery) {
    return this.deployments.requestHistory(principal, name, q.minutes ?? 60);
  }

  @Post(':name/stop')
  @HttpCode(200)
  @ApiOperation({ summary: 'Stop: no containers, requests answered 503 until started again' })
  async stop(@CurrentPrincipal() principal: Principal, @Param('name') name: string, @Req() req: FastifyRequest) {
    await this.deployments.setState(principal, name, 'stop');
    return this.deployments.get(principal, name, publicGatewayUrl(req.headers));
  }

  @Post(':name/start')
  @HttpCode(200)
  @ApiOperation({ summary: 'Start a stopped deployment again' })
  async start(@CurrentPrincipal() principal: Principal, @Param('name') name: string, @Req() req: FastifyRequest) {
    await this.deployments.setState(principal, name, 'start');
    return this.deployments.get(principal, name, publicGatewayUrl(req.headers));
  }

  @Delete(':name')
  @ApiOperation({
    summary: 'Delete: its containers wind down and the name disappears; rows are kept, and deploying the name again continues its versions',
  })
  async remove(@CurrentPrincipal() principal: Principal, @Param('name') name: string) {
    const d = await this.deployments.setState(principal, name, 'delete');
    return { name: d.name, deploymentId: d.id, state: d.state };
  }

  @Get(':name/logs')
  @ApiProduces('text/event-stream')
  @ApiOperation({
    summary:
      'Live log lines of its containers as server-sent events; nothing is stored centrally, so only lines written while you listen. 429 when the token already holds LOG_FOLLOWS_PER_TOKEN streams',
  })
  async streamLogs(
    @CurrentPrincipal() principal: Principal,
    @Param('name') name: string,
    @Query() query: LogsQuery,
    @Res() reply: FastifyReply,
  ) {
    const deployment = await this.deployments.require(principal, name);
    const release = this.logs.admit(principal.tokenId);
    reply.hijack();
    try {
      await this.logs.stream(deployment, reply.raw, { follow: query.follow ?? false, tail: query.tail, waitSeconds: query.wait });
    } finally {
      release();
    }
  }
}
