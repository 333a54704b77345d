import { Module, type OnModuleInit } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import type { FastifyInstance } from 'fastify';
import { TASK_PAYLOAD_MAX_BYTES } from '#tern/contracts';
import { installRawBody } from '../endpoints/raw-body.js';
import { payloadTooLarge } from '../tasks/task-submission.service.js';
import { MAP_URL } from '../maps/maps.module.js';
import { TasksModule } from '../tasks/tasks.module.js';
import { CallsController } from './calls.controller.js';
import { CallsService } from './calls.service.js';
import { FunctionsController } from './functions.controller.js';

/** Functions: one call answered synchronously (or later by id), on the task queues' durable machinery (see docs/architecture.md, Functions). */
@Module({
  imports: [TasksModule],
  controllers: [FunctionsController, CallsController],
  providers: [CallsService],
})
export class FunctionsModule implements OnModuleInit {
  constructor(private readonly adapterHost: HttpAdapterHost) {}

  onModuleInit() {
    const fastify = this.adapterHost.httpAdapter?.getInstance<FastifyInstance>();
    // As for tasks: any content type, checked as JSON by the call with a message that says so.
    if (fastify)
      installRawBody(fastify, {
        prefix: '/function/',
        name: 'call',
        maxBytes: TASK_PAYLOAD_MAX_BYTES,
        tooLarge: payloadTooLarge(),
        except: MAP_URL,
      });
  }
}
