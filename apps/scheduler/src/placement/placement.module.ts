import { Module } from '@nestjs/common';
import { MachinesModule } from '../machines/machines.module.js';
import { DesiredState } from './desired-state.js';
import { PlacementController } from './placement.controller.js';
import { Placer } from './placer.js';
import { Reconciler } from './reconciler.js';
import { ReputationScores } from './reputation-scores.js';
import { RouteTable } from './route-table.js';

@Module({
  imports: [MachinesModule],
  controllers: [PlacementController],
  providers: [DesiredState, Placer, Reconciler, RouteTable, ReputationScores],
  exports: [RouteTable, Reconciler],
})
export class PlacementModule {}
