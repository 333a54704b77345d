import { Module } from '@nestjs/common';
import { AgentCommands } from './agent-commands.js';
import { HeartbeatSnapshotPublisher } from './heartbeat-snapshot-publisher.js';
import { MachineGauges } from './machine-metrics.js';
import { MachineRegistry } from './machine-registry.js';
import { MachineEventsController } from './machine-events.controller.js';
import { MachineFaultRelay } from './machine-fault-relay.js';
import { MachineStateRelay } from './machine-state-relay.js';
import { OfflineSweeper } from './offline-sweeper.js';
import { UnwantedContainers } from './unwanted-containers.js';

@Module({
  controllers: [MachineEventsController],
  providers: [
    MachineRegistry,
    MachineStateRelay,
    MachineFaultRelay,
    HeartbeatSnapshotPublisher,
    OfflineSweeper,
    AgentCommands,
    UnwantedContainers,
    MachineGauges,
  ],
  exports: [AgentCommands, MachineFaultRelay],
})
export class MachineRegistryModule {}
