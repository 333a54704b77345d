import { Module, type OnModuleInit } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import type { FastifyInstance } from 'fastify';
import { MachineRegistrationModule } from '../machine-registration/machine-registration.module.js';
import { NetworkTestEchoController } from './network-test-echo.controller.js';
import { NetworkTestController } from './network-test.controller.js';
import { NetworkTestService } from './network-test.service.js';

const OCTET_STREAM = 'application/octet-stream';

@Module({
  imports: [MachineRegistrationModule],
  controllers: [NetworkTestController, NetworkTestEchoController],
  providers: [NetworkTestService],
})
export class NetworkTestModule implements OnModuleInit {
  constructor(private readonly adapterHost: HttpAdapterHost) {}

  /**
   * Fastify parses only JSON and text. Binary bodies reach handlers as the raw stream, so a
   * handler reads (or refuses) them as it goes instead of buffering them whole.
   */
  onModuleInit() {
    const fastify = this.adapterHost.httpAdapter?.getInstance<FastifyInstance>();
    if (!fastify || fastify.hasContentTypeParser(OCTET_STREAM)) return;
    fastify.addContentTypeParser(OCTET_STREAM, (_request, payload, done) => done(null, payload));
  }
}
