import { Module, type OnModuleInit } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import type { FastifyInstance } from 'fastify';
import { MachineRegistrationModule } from '../machine-registration/machine-registration.module.js';
import { AgentCodeController } from './agent-code.controller.js';
import { CodeController } from './code.controller.js';
import { CodeStore } from './code-store.js';
import { CodeService } from './code.service.js';

/** Binary bodies reach handlers as the raw stream (the network test registers octet-stream the same way). */
const BINARY_TYPES = ['application/octet-stream', 'application/gzip', 'application/x-gzip'];

@Module({
  imports: [MachineRegistrationModule],
  controllers: [CodeController, AgentCodeController],
  providers: [CodeStore, CodeService],
  exports: [CodeStore],
})
export class CodeModule implements OnModuleInit {
  constructor(private readonly adapterHost: HttpAdapterHost) {}

  onModuleInit() {
    const fastify = this.adapterHost.httpAdapter?.getInstance<FastifyInstance>();
    if (!fastify) return;
    for (const type of BINARY_TYPES) {
      if (!fastify.hasContentTypeParser(type)) fastify.addContentTypeParser(type, (_request, payload, done) => done(null, payload));
    }
  }
}
