import { Module, type OnModuleInit } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import type { FastifyInstance } from 'fastify';
import { TASK_PAYLOAD_MAX_BYTES } from '#tern/contracts';
import { EndpointsModule } from '../endpoints/endpoints.module.js';
import { installRawBody } from '../endpoints/raw-body.js';
import { MachineRegistrationModule } from '../machine-registration/machine-registration.module.js';
import { AgentResultsController } from './agent-results.controller.js';
import { AttemptFacts } from './attempt-facts.js';
import { CallbackDelivery } from './callback-delivery.js';
import { ReputationReader } from '../machines/reputation-reader.js';
import { SpotCheckExpiry } from './spot-check-expiry.js';
import { SpotChecks } from './spot-checks.js';
import { TaskEventsController } from './task-events.controller.js';
import { TaskQueueController } from './taskqueue.controller.js';
import { TaskSubmitRequestsController } from './task-submit-requests.controller.js';
import { payloadTooLarge, TaskSubmissionService } from './task-submission.service.js';
import { TaskExpiry } from './task-expiry.js';
import { TaskOutboxRelay } from './task-outbox-relay.js';
import { TaskTransitions } from './task-transitions.js';
import { TaskWaiters } from './task-waiters.js';
import { TasksController } from './tasks.controller.js';
import { TasksService } from './tasks.service.js';

/** Task queues: submit, read, wait, cancel; the task state machine; the outbox relay, ttl expiry, spot-check expiry and callbacks (see docs/architecture.md, Task queues). */
@Module({
  imports: [EndpointsModule, MachineRegistrationModule],
  controllers: [TaskQueueController, TasksController, TaskEventsController, AgentResultsController, TaskSubmitRequestsController],
  providers: [
    TaskSubmissionService,
    TaskTransitions,
    AttemptFacts,
    SpotChecks,
    SpotCheckExpiry,
    ReputationReader,
    TasksService,
    TaskWaiters,
    TaskOutboxRelay,
    TaskExpiry,
    CallbackDelivery,
  ],
  exports: [TasksService, TaskSubmissionService, TaskTransitions, TaskWaiters],
})
export class TasksModule implements OnModuleInit {
  constructor(private readonly adapterHost: HttpAdapterHost) {}

  onModuleInit() {
    const fastify = this.adapterHost.httpAdapter?.getInstance<FastifyInstance>();
    // Any content type: the payload is checked as JSON by the submit, with a message that says so.
    if (fastify)
      installRawBody(fastify, { prefix: '/taskqueue/', name: 'task', maxBytes: TASK_PAYLOAD_MAX_BYTES, tooLarge: payloadTooLarge() });
  }
}
