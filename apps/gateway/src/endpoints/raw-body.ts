import { randomUUID } from 'node:crypto';
import { PayloadTooLargeException } from '@nestjs/common';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { ENDPOINT_PREFIX } from './endpoint-path.js';

/** Same as the API's body limit: what one request may carry to a container. */
export const MAX_ENDPOINT_BODY_BYTES = 16 * 1024 * 1024;
const TOO_LARGE = `request body is over the ${MAX_ENDPOINT_BODY_BYTES / 1024 / 1024} MiB limit for endpoints: pass large inputs by reference (a URL or a volume)`;

/**
 * Fastify picks a body parser by content type and parsers are shared by every route, but an
 * endpoint must get its body byte-for-byte whatever the type (JSON included). So endpoint
 * requests get a private content type on arrival, parsed as raw bytes, and the real one is
 * forwarded to the container.
 */
const RAW_TYPE = 'application/x-tern-endpoint-body';
const ORIGINAL_TYPE = Symbol('ternOriginalContentType');
const REQUEST_ID = Symbol('ternRequestId');

type Tagged = FastifyRequest & { [ORIGINAL_TYPE]?: string; [REQUEST_ID]?: string };

export function requestIdOf(request: FastifyRequest): string {
  return (request as Tagged)[REQUEST_ID] ?? randomUUID().replace(/-/g, '');
}

export function originalContentType(request: FastifyRequest): string | undefined {
  return (request as Tagged)[ORIGINAL_TYPE];
}

export function installEndpointBodyHandling(fastify: FastifyInstance): void {
  if (fastify.hasContentTypeParser(RAW_TYPE)) return;
  fastify.addHook('onRequest', async (request, reply) => {
    if (!request.url.startsWith(ENDPOINT_PREFIX)) return;
    const tagged = request as Tagged;
    // Every endpoint response carries it, errors included (401 from the guard, 413 below).
    tagged[REQUEST_ID] = randomUUID().replace(/-/g, '');
    void reply.header('x-tern-request-id', tagged[REQUEST_ID]);
    if (Number(request.headers['content-length'] ?? 0) > MAX_ENDPOINT_BODY_BYTES) {
      return reply.code(413).send({ statusCode: 413, error: 'Payload Too Large', message: TOO_LARGE });
    }
    tagged[ORIGINAL_TYPE] = request.headers['content-type'];
    request.headers['content-type'] = RAW_TYPE;
  });
  fastify.addContentTypeParser(RAW_TYPE, { bodyLimit: MAX_ENDPOINT_BODY_BYTES + 1 }, (_request, payload, done) => {
    const parts: Buffer[] = [];
    let size = 0;
    payload.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_ENDPOINT_BODY_BYTES) {
        payload.removeAllListeners('data');
        payload.resume();
        // An HttpException: Nest's exception filter answers any other error with a bare 500.
        done(new PayloadTooLargeException(TOO_LARGE), undefined);
        return;
      }
      parts.push(chunk);
    });
    payload.on('end', () => {
      if (size <= MAX_ENDPOINT_BODY_BYTES) done(null, Buffer.concat(parts, size));
    });
    payload.on('error', (e) => done(e, undefined));
  });
}
