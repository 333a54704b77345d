import { Controller } from '@nestjs/common';
import { Payload } from '@nestjs/microservices';
import { TASK_COMPLETED, TASK_FAILED, TASK_STARTED, TaskCompleted, TaskFailed, TaskStarted } from '#tern/contracts';
import { OnMessage } from '#tern/messaging';
import { meteringEventsTotal } from '../metering-metrics.js';
import { CONSUMER } from './consumer-options.js';
import { TaskUsageLedger } from './task-usage-ledger.js';

/** Task attempts: where each ran, how it ended, how long it took. */
@Controller()
export class TaskUsageEventsController {
  constructor(private readonly ledger: TaskUsageLedger) {}

  @OnMessage(TASK_STARTED, CONSUMER)
  async started(@Payload() event: TaskStarted) {
    await this.ledger.started(event);
    meteringEventsTotal.inc({ kind: 'task.started' });
  }

  @OnMessage(TASK_COMPLETED, CONSUMER)
  async completed(@Payload() event: TaskCompleted) {
    await this.ledger.completed(event);
    meteringEventsTotal.inc({ kind: 'task.completed' });
  }

  @OnMessage(TASK_FAILED, CONSUMER)
  async failed(@Payload() event: TaskFailed) {
    await this.ledger.failed(event);
    meteringEventsTotal.inc({ kind: 'task.failed' });
  }
}
