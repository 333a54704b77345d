import { Module } from '@nestjs/common';
import { BacklogController } from './backlog.controller.js';
import { DeploymentCatalog } from './deployment-catalog.js';
import { LeaderLock } from './leader-lock.js';
import { LoadBoard } from './load-board.js';
import { ScalingLoop } from './scaling-loop.js';
import { TaskBacklog } from './task-backlog.js';

@Module({
  controllers: [BacklogController],
  providers: [DeploymentCatalog, LoadBoard, LeaderLock, TaskBacklog, ScalingLoop],
})
export class ScalingModule {}
