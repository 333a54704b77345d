import { Controller, Get } from '@nestjs/common';
import { ApiBearerAuth, ApiOperation, ApiTags } from '@nestjs/swagger';
import type { SystemHealth } from '#tern/contracts';
import { CurrentPrincipal, type Principal } from '../auth/principal.js';
import { SystemHealthService } from './system-health.service.js';

/**
 * The services' state on the API listener, with a token: /health/ready may live on the ops
 * listener (OPS_PORT), out of a browser's reach. A workspace token sees whether each service is
 * up and its versions, not the hosts nor the machines' agents (the operator's to see).
 */
@ApiTags('health')
@ApiBearerAuth()
@Controller('api/v1/system')
export class SystemController {
  constructor(private readonly health: SystemHealthService) {}

  @Get()
  @ApiOperation({ summary: 'Every service with its instances (version, start time) and the connected agents (hosts and agents: operator)' })
  async get(@CurrentPrincipal() p: Principal): Promise<SystemHealth> {
    const state = await this.health.check();
    if (p.role === 'operator') return state;
    const services = Object.fromEntries(
      Object.entries(state.services).map(([role, s]) => [
        role,
        { status: s.status, instances: s.instances.map(({ id, version, startedAt }) => ({ id, version, startedAt })) },
      ]),
    ) as SystemHealth['services'];
    return { ...state, services, agents: [] };
  }
}
