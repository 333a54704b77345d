import { STATUS_CODES } from 'node:http';
import { HttpException, Injectable, Logger } from '@nestjs/common';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { OpenAPIObject } from '@nestjs/swagger';
import { AuthService } from '../auth/auth.service.js';
import { EndpointsService } from './endpoints.service.js';
import { withoutTicket } from './socket-tickets.js';

/** The patterns served (metrics label requests by pattern). */
const PATTERNS = ['/endpoint/:name', '/endpoint/:name/*'];

/** The route's OpenAPI entry (a Fastify route has none of its own). */
const OPERATION = {
  summary: 'Invoke an endpoint',
  description:
    "Forwards the request, body byte-for-byte, to the least-loaded ready container of the latest version of the deployment (`/endpoint/<name>@<N>/…` or the header `x-tern-version: <N>` pins version N; the path after the name is passed on untouched, `/v1/…` included) and streams its response back. 400 a pin that is not a version, 404 unknown deployment or version, 413 body over 16 MiB, 429 buffer full, 503 stopped, 504 no response started within the deployment's timeout (saying why: the last failed start or why placement is short). A started response silent past `idle_timeout` or running past `max_duration` is ended with an `event: error` (text/event-stream) or an aborted transfer. Every response has `x-tern-request-id`; answers of a container have `x-tern-version`.",
  tags: ['endpoints'],
  security: [{ bearer: [] }],
  parameters: [],
  responses: { 200: { description: '' } },
};
const DOCUMENTED_METHODS = ['get', 'post', 'put', 'delete', 'patch', 'options', 'head', 'search'] as const;

/**
 * `/endpoint/<name>…`, the data plane's hot path, served by Fastify directly: no Nest router,
 * guard, pipe or interceptor per request. The bearer token is checked by the same AuthService
 * (same cache, same 401s) as ApiTokenGuard; errors get the same JSON as Nest's exception filter.
 * Body limits, request ids, raw bodies and the input checks stay the instance-wide hooks they
 * are for every route (raw-body.ts, request-intake.ts).
 */
@Injectable()
export class EndpointsRoute {
  private readonly logger = new Logger('endpoints');

  constructor(
    private readonly auth: AuthService,
    private readonly endpoints: EndpointsService,
  ) {}

  install(fastify: FastifyInstance): void {
    // Returning the reply tells Fastify it is being answered (a stream may still be flowing when
    // serve resolves): an async handler that resolved with nothing would be answered empty.
    const handler = async (request: FastifyRequest, reply: FastifyReply) => {
      await this.serve(request, reply);
      return reply;
    };
    for (const url of PATTERNS) fastify.all(url, handler);
  }

  private async serve(request: FastifyRequest, reply: FastifyReply): Promise<void> {
    try {
      const principal = await this.auth.authenticate(request.headers.authorization);
      await this.endpoints.forward(principal, request, reply);
    } catch (e) {
      if (reply.sent) return;
      // ApiError and AuthService's 401: the very answer Nest's exception filter gives them.
      if (e instanceof HttpException) return void reply.code(e.getStatus()).send(e.getResponse());
      this.logger.error(`request ${withoutTicket(request.url)} failed: ${(e as Error).stack ?? e}`);
      void reply.code(500).send({ statusCode: 500, error: STATUS_CODES[500], message: 'internal error' });
    }
  }
}

/** Adds the route's entry to the OpenAPI document, where a Nest controller's would be. */
export function documentEndpointsRoute(document: OpenAPIObject): void {
  for (const path of ['/endpoint/{name}', '/endpoint/{name}/{path}']) {
    document.paths[path] = Object.fromEntries(
      // Stable operation ids: clients generated from the document keep their method names.
      DOCUMENTED_METHODS.map((m) => [m, { ...OPERATION, operationId: `EndpointsController_invoke_${m}` }]),
    );
  }
}
