import { Module } from '@nestjs/common';
import { PoolsModule } from '../pools/pools.module.js';
import { HeartbeatSnapshotReader } from './heartbeat-snapshot-reader.js';
import { MachineTokenRotationService } from './machine-token-rotation.service.js';
import { MachinesController } from './machines.controller.js';
import { MachinesService } from './machines.service.js';
import { ReputationReader } from './reputation-reader.js';

@Module({
  imports: [PoolsModule],
  controllers: [MachinesController],
  providers: [MachinesService, HeartbeatSnapshotReader, ReputationReader, MachineTokenRotationService],
  exports: [MachineTokenRotationService],
})
export class MachinesModule {}
