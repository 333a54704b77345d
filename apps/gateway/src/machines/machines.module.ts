import { Module } from '@nestjs/common';
import { PoolsModule } from '../pools/pools.module.js';
import { HeartbeatSnapshots } from './heartbeat-snapshots.js';
import { MachinesController } from './machines.controller.js';
import { MachinesService } from './machines.service.js';
import { ReputationReader } from './reputation-reader.js';

@Module({ imports: [PoolsModule], controllers: [MachinesController], providers: [MachinesService, HeartbeatSnapshots, ReputationReader] })
export class MachinesModule {}
