import { Controller } from '@nestjs/common';
import { Payload } from '@nestjs/microservices';
import { TASK_COMPLETED, TASK_FAILED, TASK_STARTED, TaskCompleted, TaskFailed, TaskStarted } from '#tern/contracts';
import { OnMessage } from '#tern/messaging';
import { TaskLedger } from './task-ledger.service.js';

/**
 * The agents' task events into the tasks table, one durable consumer per subject (shared by
 * gateway replicas; a restarted gateway resumes where it stopped, so no outcome is lost).
 */
@Controller()
export class TaskEventsController {
  constructor(private readonly ledger: TaskLedger) {}

  @OnMessage(TASK_STARTED, { concurrency: 64 })
  async started(@Payload() e: TaskStarted) {
    await this.ledger.started(e);
  }

  @OnMessage(TASK_COMPLETED, { concurrency: 64 })
  async completed(@Payload() e: TaskCompleted) {
    await this.ledger.completed(e);
  }

  @OnMessage(TASK_FAILED, { concurrency: 64 })
  async failed(@Payload() e: TaskFailed) {
    await this.ledger.failed(e);
  }
}
