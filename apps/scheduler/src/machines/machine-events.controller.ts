import { Controller } from '@nestjs/common';
import { Payload } from '@nestjs/microservices';
import { MACHINE_BEAT, MACHINE_HEARTBEAT, MACHINE_NETWORK_TESTED, MachineHeartbeat, MachineNetworkTested } from '#tern/contracts';
import { OnEvent, OnMessage } from '#tern/messaging';
import { HEARTBEAT_BATCH, MachineRegistry } from './machine-registry.js';
import { UnwantedContainers } from './unwanted-containers.js';

/** Inbound machine traffic; validation has already happened in the transport. */
@Controller()
export class MachineEventsController {
  constructor(
    private readonly machines: MachineRegistry,
    private readonly unwanted: UnwantedContainers,
  ) {}

  /**
   * Core NATS, in the scheduler's queue group: each beat reaches one replica, stored nowhere.
   * Room for many batches in hand; past it a beat is dropped, and the next one 10 s later stands for it.
   */
  @OnEvent(MACHINE_BEAT, { maxInFlight: 20 * HEARTBEAT_BATCH })
  async beat(@Payload() beat: MachineHeartbeat) {
    if (await this.machines.recordHeartbeat(beat)) await this.unwanted.check(beat);
  }

  // The previous release's agents, on JetStream, for one release more (MACHINE_HEARTBEAT).
  // Only beats sent from now on matter: a backlog replayed at first start would revive the dead.
  // Twice a batch in hand, so one batch fills while the one before commits.
  @OnMessage(MACHINE_HEARTBEAT, { deliver: 'new', concurrency: 2 * HEARTBEAT_BATCH })
  async heartbeat(@Payload() beat: MachineHeartbeat) {
    await this.beat(beat);
  }

  @OnMessage(MACHINE_NETWORK_TESTED)
  networkTested(@Payload() result: MachineNetworkTested) {
    return this.machines.recordNetworkTest(result);
  }
}
