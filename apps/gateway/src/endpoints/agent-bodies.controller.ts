import { Controller, Get, Header, NotFoundException, Param, StreamableFile, UseGuards } from '@nestjs/common';
import { ApiBearerAuth, ApiOperation, ApiTags } from '@nestjs/swagger';
import { AGENT_BODIES_PATH } from '#tern/contracts';
import { bodyObjectName, Messaging, takeBody } from '#tern/messaging';
import { Public } from '#tern/observability';
import { type Machine } from '#tern/persistence';
import { CurrentMachine, MachineTokenOnly } from '../machine-registration/machine-caller.js';
import { MachineCallerGuard } from '../machine-registration/machine-caller.guard.js';

/**
 * Large request bodies for the machine a request was routed to: the object is named after that
 * machine (bodyObjectName), so another machine asks for a name that does not exist and gets the
 * same 404 as for a body already read or expired. Read once: the object is deleted as it is served.
 */
@ApiTags('machine agent')
@ApiBearerAuth()
@Public()
@UseGuards(MachineCallerGuard)
@MachineTokenOnly()
@Controller(AGENT_BODIES_PATH)
export class AgentBodiesController {
  constructor(private readonly messaging: Messaging) {}

  @Get(':requestId')
  @Header('content-type', 'application/octet-stream')
  @ApiOperation({ summary: 'The large body of a request routed to the calling machine, once; 404 otherwise' })
  async get(@CurrentMachine() machine: Machine, @Param('requestId') requestId: string): Promise<StreamableFile> {
    const body = await takeBody(this.messaging, bodyObjectName(machine.id, requestId));
    if (!body)
      throw new NotFoundException(`request body ${requestId} is not waiting for this machine (read already, expired, or routed elsewhere)`);
    return new StreamableFile(Buffer.from(body.buffer, body.byteOffset, body.byteLength));
  }
}
