import { Module, type OnModuleInit } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import type { FastifyInstance } from 'fastify';
import { MachineRegistrationModule } from '../machine-registration/machine-registration.module.js';
import { AgentBodiesController } from './agent-bodies.controller.js';
import { EndpointsRoute } from './endpoints.route.js';
import { EndpointsService } from './endpoints.service.js';
import { LanesService } from './lanes.service.js';
import { ENDPOINT_BODY, installRawBody } from './raw-body.js';
import { RoutesMirror } from './routes-mirror.js';
import { RequestStats } from './request-stats.service.js';

/** The data plane: `/endpoint/<name>…` to containers over NATS (see docs/architecture.md, Endpoints). */
@Module({
  imports: [MachineRegistrationModule],
  controllers: [AgentBodiesController],
  providers: [RoutesMirror, LanesService, EndpointsService, EndpointsRoute, RequestStats],
  exports: [RoutesMirror],
})
export class EndpointsModule implements OnModuleInit {
  constructor(
    private readonly adapterHost: HttpAdapterHost,
    private readonly route: EndpointsRoute,
  ) {}

  onModuleInit() {
    const fastify = this.adapterHost.httpAdapter?.getInstance<FastifyInstance>();
    if (!fastify) return;
    installRawBody(fastify, ENDPOINT_BODY);
    this.route.install(fastify);
  }
}
