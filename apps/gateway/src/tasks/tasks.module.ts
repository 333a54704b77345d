import { Module, type OnModuleInit } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import type { FastifyInstance } from 'fastify';
import { TASK_PAYLOAD_MAX_BYTES } from '#tern/contracts';
import { EndpointsModule } from '../endpoints/endpoints.module.js';
import { installRawBody } from '../endpoints/raw-body.js';
import { TaskEventsController } from './task-events.controller.js';
import { TaskLedger } from './task-ledger.service.js';
import { TaskQueueController } from './taskqueue.controller.js';
import { payloadTooLarge, TaskSubmissionService } from './task-submission.service.js';
import { TaskSweeper } from './task-sweeper.service.js';
import { TaskWaiters } from './task-waiters.service.js';
import { TasksController } from './tasks.controller.js';
import { TasksService } from './tasks.service.js';

/** Task queues: submit, read, wait, cancel; the task state machine; sweeps (see docs/architecture.md, Task queues). */
@Module({
  imports: [EndpointsModule],
  controllers: [TaskQueueController, TasksController, TaskEventsController],
  providers: [TaskSubmissionService, TaskLedger, TasksService, TaskWaiters, TaskSweeper],
  exports: [TasksService],
})
export class TasksModule implements OnModuleInit {
  constructor(private readonly adapterHost: HttpAdapterHost) {}

  onModuleInit() {
    const fastify = this.adapterHost.httpAdapter?.getInstance<FastifyInstance>();
    // Any content type: the payload is checked as JSON by the submit, with a message that says so.
    if (fastify) installRawBody(fastify, { prefix: '/taskqueue/', name: 'task', maxBytes: TASK_PAYLOAD_MAX_BYTES, tooLarge: payloadTooLarge() });
  }
}
