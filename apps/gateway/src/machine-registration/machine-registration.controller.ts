import { Body, Controller, HttpCode, Post, UseGuards } from '@nestjs/common';
import { ApiBearerAuth, ApiOperation, ApiTags } from '@nestjs/swagger';
import { MachineKeepaliveRequest, MachineRegisterRequest } from '#tern/contracts';
import { Public } from '#tern/observability';
import { type Machine } from '#tern/persistence';
import { MachineTokenRotationService } from '../machines/machine-token-rotation.service.js';
import { CurrentMachine, CurrentMachineCaller, type MachineCaller, MachineTokenOnly } from './machine-caller.js';
import { MachineCallerGuard } from './machine-caller.guard.js';
import { MachineKeepaliveService } from './machine-keepalive.service.js';
import { MachineRegistrationService } from './machine-registration.service.js';

/** The agent's HTTP calls. Public to the API-token guard; MachineCallerGuard authenticates them. */
@ApiTags('machine agent')
@ApiBearerAuth()
@Public()
@UseGuards(MachineCallerGuard)
@Controller('api/v1/machine')
export class MachineRegistrationController {
  constructor(
    private readonly registration: MachineRegistrationService,
    private readonly keepalives: MachineKeepaliveService,
    private readonly tokens: MachineTokenRotationService,
  ) {}

  @Post('register')
  @HttpCode(200)
  @ApiOperation({
    summary:
      'Register an agent with a join token, its machine token, or an operator API token; answers how to reach NATS (and, for a join or API token, the machine token, once)',
  })
  register(@CurrentMachineCaller() caller: MachineCaller, @Body() body: MachineRegisterRequest) {
    return this.registration.register(caller, body);
  }

  @Post('keepalive')
  @HttpCode(200)
  @MachineTokenOnly()
  @ApiOperation({ summary: 'beta9-compatible keepalive with the machine token; counts as a heartbeat' })
  keepalive(@CurrentMachine() machine: Machine, @Body() body: MachineKeepaliveRequest) {
    return this.keepalives.keepalive(machine, body);
  }

  @Post('rotate-token')
  @HttpCode(200)
  @MachineTokenOnly()
  @ApiOperation({ summary: 'The machine replaces its own token (with its current one); the old one stops working at once' })
  rotateToken(@CurrentMachine() machine: Machine) {
    return this.tokens.rotateOwn(machine);
  }
}
