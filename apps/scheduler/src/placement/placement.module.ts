import { Module } from '@nestjs/common';
import { MachineRegistryModule } from '../machines/machine-registry.module.js';
import { DesiredState } from './desired-state.js';
import { PlacementController } from './placement.controller.js';
import { Placer } from './placer.js';
import { Reconciler } from './reconciler.js';
import { ReputationScores } from './reputation-scores.js';
import { RoomGrowth } from './room-growth.js';
import { RoutePublisher } from './route-publisher.js';

@Module({
  imports: [MachineRegistryModule],
  controllers: [PlacementController],
  providers: [DesiredState, Placer, Reconciler, RoomGrowth, RoutePublisher, ReputationScores],
  exports: [RoutePublisher, Reconciler],
})
export class PlacementModule {}
