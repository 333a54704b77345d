import { Module } from '@nestjs/common';
import { MachinesModule } from '../machines/machines.module.js';
import { DesiredState } from './desired-state.js';
import { PlacementController } from './placement.controller.js';
import { Placer } from './placer.js';
import { Reconciler } from './reconciler.js';
import { ReputationScores } from './reputation-scores.js';
import { RoutePublisher } from './route-publisher.js';

@Module({
  imports: [MachinesModule],
  controllers: [PlacementController],
  providers: [DesiredState, Placer, Reconciler, RoutePublisher, ReputationScores],
  exports: [RoutePublisher, Reconciler],
})
export class PlacementModule {}
