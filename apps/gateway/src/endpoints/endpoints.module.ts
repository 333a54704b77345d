import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { Module, type OnModuleInit } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import type { FastifyInstance } from 'fastify';
import { MachineRegistrationModule } from '../machine-registration/machine-registration.module.js';
import { AgentBodiesController } from './agent-bodies.controller.js';
import { EndpointSockets } from './endpoint-sockets.js';
import { EndpointsRoute } from './endpoints.route.js';
import { EndpointsService } from './endpoints.service.js';
import { InvokeClient } from './invoke-client.js';
import { LanesService } from './lanes.service.js';
import { ENDPOINT_BODY, installRawBody } from './raw-body.js';
import { RoutesMirror } from './routes-mirror.js';
import { RequestStats } from './request-stats.service.js';
import { SocketTickets } from './socket-tickets.js';
import { SocketTicketsController } from './socket-tickets.controller.js';

/** The data plane: `/endpoint/<name>…` to containers over NATS (see docs/architecture.md, Endpoints). */
@Module({
  imports: [MachineRegistrationModule],
  controllers: [AgentBodiesController, SocketTicketsController],
  providers: [RoutesMirror, LanesService, InvokeClient, EndpointsService, EndpointsRoute, RequestStats, SocketTickets, EndpointSockets],
  exports: [RoutesMirror],
})
export class EndpointsModule implements OnModuleInit {
  constructor(
    private readonly adapterHost: HttpAdapterHost,
    private readonly route: EndpointsRoute,
    private readonly sockets: EndpointSockets,
  ) {}

  onModuleInit() {
    const fastify = this.adapterHost.httpAdapter?.getInstance<FastifyInstance>();
    if (!fastify) return;
    installRawBody(fastify, ENDPOINT_BODY);
    this.route.install(fastify);
    // WebSockets to endpoints: an upgrade never reaches a route (sandboxes listen for theirs too).
    fastify.server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
      if (EndpointSockets.handles(req.url)) this.sockets.upgrade(req, socket, head);
    });
  }
}
