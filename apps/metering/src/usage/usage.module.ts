import { Module } from '@nestjs/common';
import { Checkpointer } from './checkpointer.js';
import { ContainerEventsController } from './container-events.controller.js';
import { ContainerUsageLedger } from './container-usage-ledger.js';
import { TaskEventsController } from './task-events.controller.js';
import { TaskUsageLedger } from './task-usage-ledger.js';

@Module({
  controllers: [ContainerEventsController, TaskEventsController],
  providers: [ContainerUsageLedger, TaskUsageLedger, Checkpointer],
})
export class UsageModule {}
