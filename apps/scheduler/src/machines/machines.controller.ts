import { Controller } from '@nestjs/common';
import { Payload } from '@nestjs/microservices';
import { MACHINE_HEARTBEAT, MachineHeartbeat } from '#tern/contracts';
import { OnMessage } from '#tern/messaging';
import { MachinesService } from './machines.service.js';

/** Inbound machine traffic; validation has already happened in the transport. */
@Controller()
export class MachinesController {
  constructor(private readonly machines: MachinesService) {}

  @OnMessage(MACHINE_HEARTBEAT, { deliver: 'new', concurrency: 64 })
  heartbeat(@Payload() beat: MachineHeartbeat) {
    return this.machines.recordHeartbeat(beat);
  }
}
