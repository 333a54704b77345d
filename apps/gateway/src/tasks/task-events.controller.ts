import { Controller } from '@nestjs/common';
import { Payload } from '@nestjs/microservices';
import { TASK_COMPLETED, TASK_FAILED, TASK_STARTED, TaskCompleted, TaskFailed, TaskStarted } from '#tern/contracts';
import { OnMessage } from '#tern/messaging';
import { TaskTransitions } from './task-transitions.js';

/**
 * The agents' task events into the tasks table, one durable consumer per subject (shared by
 * gateway replicas; a restarted gateway resumes where it stopped, so no outcome is lost).
 */
@Controller()
export class TaskEventsController {
  constructor(private readonly transitions: TaskTransitions) {}

  @OnMessage(TASK_STARTED, { concurrency: 64 })
  async started(@Payload() e: TaskStarted) {
    await this.transitions.started(e);
  }

  @OnMessage(TASK_COMPLETED, { concurrency: 64 })
  async completed(@Payload() e: TaskCompleted) {
    await this.transitions.completed(e);
  }

  @OnMessage(TASK_FAILED, { concurrency: 64 })
  async failed(@Payload() e: TaskFailed) {
    await this.transitions.failed(e);
  }
}
