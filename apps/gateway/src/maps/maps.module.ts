import { Module, type OnModuleInit } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import type { FastifyInstance } from 'fastify';
import { installStreamBody } from '../endpoints/raw-body.js';
import { TasksModule } from '../tasks/tasks.module.js';
import { MapSettler } from './map-settler.js';
import { MapsController } from './maps.controller.js';
import { MapsService } from './maps.service.js';

/** A map's inputs: POST /function/<name>[/v<N>]/map. */
export const MAP_URL = /^\/function\/[^/?]+(?:\/v\d+)?\/map(?:\?|$)/;

/** Maps: a function over many inputs in chunks, durably, results streamed in order (see docs/architecture.md, Functions). */
@Module({
  imports: [TasksModule],
  controllers: [MapsController],
  providers: [MapsService, MapSettler],
})
export class MapsModule implements OnModuleInit {
  constructor(private readonly adapterHost: HttpAdapterHost) {}

  onModuleInit() {
    const fastify = this.adapterHost.httpAdapter?.getInstance<FastifyInstance>();
    if (fastify) installStreamBody(fastify, { pattern: MAP_URL, name: 'map' });
  }
}
