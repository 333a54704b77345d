import { Controller, Get, Res } from '@nestjs/common';
import { ApiOperation, ApiTags } from '@nestjs/swagger';
import type { FastifyReply } from 'fastify';
import { Public } from '#tern/observability';
import { SystemHealthService } from './system-health.service.js';

@ApiTags('health')
@Public()
@Controller('health')
export class SystemHealthController {
  constructor(private readonly health: SystemHealthService) {}

  @Get('ready')
  @ApiOperation({ summary: 'State of every service and the connected agents; 503 while any service is down' })
  async ready(@Res({ passthrough: true }) reply: FastifyReply) {
    const state = await this.health.check();
    reply.status(state.status === 'ok' ? 200 : 503);
    return state;
  }
}
