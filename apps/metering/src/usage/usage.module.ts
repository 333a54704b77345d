import { Module } from '@nestjs/common';
import { Checkpointer } from './checkpointer.js';
import { ContainerEventsController } from './container-events.controller.js';
import { ContainerLedger } from './container-ledger.js';
import { TaskEventsController } from './task-events.controller.js';
import { TaskLedger } from './task-ledger.js';

@Module({
  controllers: [ContainerEventsController, TaskEventsController],
  providers: [ContainerLedger, TaskLedger, Checkpointer],
})
export class UsageModule {}
