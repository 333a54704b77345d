import type { HttpAdapterHost } from '@nestjs/core';
import type { FastifyInstance } from 'fastify';

/** Binary bodies reach handlers as the raw stream (the network test registers octet-stream the same way). */
const BINARY_TYPES = ['application/octet-stream', 'application/gzip', 'application/x-gzip'];

/** Registers the raw-stream parser for binary bodies once, whichever module asks first. */
export function acceptBinaryBodies(adapterHost: HttpAdapterHost): void {
  const fastify = adapterHost.httpAdapter?.getInstance<FastifyInstance>();
  if (!fastify) return;
  for (const type of BINARY_TYPES) {
    if (!fastify.hasContentTypeParser(type)) fastify.addContentTypeParser(type, (_request, payload, done) => done(null, payload));
  }
}
