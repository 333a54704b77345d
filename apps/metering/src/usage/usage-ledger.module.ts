import { Module } from '@nestjs/common';
import { Checkpointer } from './checkpointer.js';
import { ContainerUsageEventsController } from './container-usage-events.controller.js';
import { ContainerUsageLedger } from './container-usage-ledger.js';
import { SandboxUsageEventsController } from './sandbox-usage-events.controller.js';
import { TaskUsageEventsController } from './task-usage-events.controller.js';
import { TaskUsageLedger } from './task-usage-ledger.js';

@Module({
  controllers: [ContainerUsageEventsController, TaskUsageEventsController, SandboxUsageEventsController],
  providers: [ContainerUsageLedger, TaskUsageLedger, Checkpointer],
})
export class UsageLedgerModule {}
