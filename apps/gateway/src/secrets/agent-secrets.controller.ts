import { Controller, Get, Header, Param, UseGuards } from '@nestjs/common';
import { ApiBearerAuth, ApiOperation, ApiTags } from '@nestjs/swagger';
import { AGENT_CONTAINERS_PATH, type AgentContainerSecrets } from '#tern/contracts';
import { Public } from '#tern/observability';
import type { Machine } from '#tern/persistence';
import { CurrentMachine, MachineTokenOnly } from '../machine-registration/machine-caller.js';
import { MachineCallerGuard } from '../machine-registration/machine-caller.guard.js';
import { AgentContainerParams } from './dto/secret.dto.js';
import { SecretsService } from './secrets.service.js';

/**
 * The secrets a starting container's spec names (`secrets:`), in clear, for its agent to set as
 * environment variables: only for a container placed on the calling machine and not yet started,
 * so the start command never carries them and no machine reads another's. Anything else is 404.
 */
@ApiTags('machine agent')
@ApiBearerAuth()
@Public()
@UseGuards(MachineCallerGuard)
@MachineTokenOnly()
@Controller(AGENT_CONTAINERS_PATH)
export class AgentSecretsController {
  constructor(private readonly secrets: SecretsService) {}

  @Get(':containerId/secrets')
  @Header('cache-control', 'no-store')
  @ApiOperation({ summary: 'The secrets of a container placed on the calling machine, while it starts, for its environment' })
  envOf(@CurrentMachine() machine: Machine, @Param() params: AgentContainerParams): Promise<AgentContainerSecrets> {
    return this.secrets.envOfStartingContainer(machine.id, params.containerId);
  }
}
