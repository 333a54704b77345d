import { Module } from '@nestjs/common';
import { NatsAccount } from '../nats-users/nats-account.js';
import { MachineNatsUsers } from '../machine-registration/machine-nats-users.js';
import { PoolsModule } from '../pools/pools.module.js';
import { HeartbeatSnapshotReader } from './heartbeat-snapshot-reader.js';
import { MachineTokenRotationService } from './machine-token-rotation.service.js';
import { MachinesController } from './machines.controller.js';
import { MachinesService } from './machines.service.js';
import { ReputationReader } from './reputation-reader.js';

@Module({
  imports: [PoolsModule],
  controllers: [MachinesController],
  providers: [MachinesService, HeartbeatSnapshotReader, ReputationReader, MachineTokenRotationService, MachineNatsUsers, NatsAccount],
  exports: [MachineTokenRotationService],
})
export class MachinesModule {}
