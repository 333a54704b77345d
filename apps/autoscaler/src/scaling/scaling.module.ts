import { Module } from '@nestjs/common';
import { BacklogController } from './backlog.controller.js';
import { DeploymentCatalog } from './deployment-catalog.service.js';
import { LeaderLock } from './leader-lock.service.js';
import { LoadBoard } from './load-board.service.js';
import { ScalingLoop } from './scaling-loop.service.js';
import { TaskBacklog } from './task-backlog.service.js';

@Module({
  controllers: [BacklogController],
  providers: [DeploymentCatalog, LoadBoard, LeaderLock, TaskBacklog, ScalingLoop],
})
export class ScalingModule {}
