import { Module } from '@nestjs/common';
import { AgentCommands } from './agent-commands.js';
import { HeartbeatSnapshots } from './heartbeat-snapshots.js';
import { MachineRegistry } from './machine-registry.js';
import { MachineTransitions } from './machine-transitions.js';
import { MachinesController } from './machines.controller.js';
import { OfflineSweeper } from './offline-sweeper.js';
import { UnwantedContainers } from './unwanted-containers.js';

@Module({
  controllers: [MachinesController],
  providers: [MachineRegistry, MachineTransitions, HeartbeatSnapshots, OfflineSweeper, AgentCommands, UnwantedContainers],
  exports: [AgentCommands],
})
export class MachinesModule {}
