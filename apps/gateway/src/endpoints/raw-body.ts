import { randomUUID } from 'node:crypto';
import { PayloadTooLargeException } from '@nestjs/common';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { HTTP_BODY_LIMIT } from '#tern/service';
import { ENDPOINT_PREFIX } from './endpoint-path.js';

/** Same as the API's body limit: what one request may carry to a container. */
export const MAX_ENDPOINT_BODY_BYTES = HTTP_BODY_LIMIT;

/**
 * Fastify picks a body parser by content type and parsers are shared by every route, but an
 * endpoint must get its body byte-for-byte whatever the type (JSON included), and a task
 * submit must get a clear answer whatever type the caller sent. So requests under such a
 * prefix get a private content type on arrival, parsed as raw bytes up to the prefix's limit,
 * and the real type is kept aside.
 */
export interface RawBodyRoute {
  /** URL prefix, e.g. `/endpoint/`. */
  readonly prefix: string;
  /** Narrows the prefix: only requests this accepts get raw bodies. */
  readonly matches?: (method: string, url: string) => boolean;
  /** Distinguishes the private content type of this prefix. */
  readonly name: string;
  readonly maxBytes: number;
  /** The 413 message. */
  readonly tooLarge: string;
  /** Give every request (and its response, errors included) an `x-tern-request-id`. */
  readonly requestIds?: boolean;
  /** URLs under the prefix that keep their body as a stream (installStreamBody) instead. */
  readonly except?: RegExp;
}

const ORIGINAL_TYPE = Symbol('ternOriginalContentType');
const REQUEST_ID = Symbol('ternRequestId');

type Tagged = FastifyRequest & { [ORIGINAL_TYPE]?: string; [REQUEST_ID]?: string };

export function requestIdOf(request: FastifyRequest): string {
  return (request as Tagged)[REQUEST_ID] ?? randomUUID().replace(/-/g, '');
}

export function originalContentType(request: FastifyRequest): string | undefined {
  return (request as Tagged)[ORIGINAL_TYPE];
}

/** The raw-body routes of each Fastify instance, looked at by one onRequest hook. */
const rawRoutes = new WeakMap<FastifyInstance, { route: RawBodyRoute; rawType: string }[]>();

export function installRawBody(fastify: FastifyInstance, route: RawBodyRoute): void {
  const rawType = `application/x-tern-${route.name}-body`;
  if (fastify.hasContentTypeParser(rawType)) return;
  let routes = rawRoutes.get(fastify);
  if (!routes) {
    const all: { route: RawBodyRoute; rawType: string }[] = (routes = []);
    rawRoutes.set(fastify, all);
    // One synchronous hook for every prefix, not an async one each: it runs on every request of the API.
    fastify.addHook('onRequest', (request, reply, done) => {
      const url = request.url;
      for (const { route, rawType } of all) {
        if (!url.startsWith(route.prefix) || (route.matches && !route.matches(request.method, url)) || route.except?.test(url)) continue;
        const tagged = request as Tagged;
        if (route.requestIds) {
          tagged[REQUEST_ID] = randomUUID().replace(/-/g, '');
          void reply.header('x-tern-request-id', tagged[REQUEST_ID]);
        }
        // Answered here, the request goes no further: `done` is not called.
        if (Number(request.headers['content-length'] ?? 0) > route.maxBytes)
          return void reply.code(413).send({ statusCode: 413, error: 'Payload Too Large', message: route.tooLarge });
        tagged[ORIGINAL_TYPE] = request.headers['content-type'];
        request.headers['content-type'] = rawType;
        break;
      }
      done();
    });
  }
  routes.push({ route, rawType });
  fastify.addContentTypeParser(rawType, { bodyLimit: route.maxBytes + 1 }, (_request, payload, done) => {
    const parts: Buffer[] = [];
    let size = 0;
    payload.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > route.maxBytes) {
        payload.removeAllListeners('data');
        payload.resume();
        // An HttpException: Nest's exception filter answers any other error with a bare 500.
        done(new PayloadTooLargeException(route.tooLarge), undefined);
        return;
      }
      parts.push(chunk);
    });
    payload.on('end', () => {
      if (size <= route.maxBytes) done(null, Buffer.concat(parts, size));
    });
    payload.on('error', (e) => done(e, undefined));
  });
}

export const ENDPOINT_BODY: RawBodyRoute = {
  prefix: ENDPOINT_PREFIX,
  name: 'endpoint',
  maxBytes: MAX_ENDPOINT_BODY_BYTES,
  tooLarge: `request body is over the ${MAX_ENDPOINT_BODY_BYTES / 1024 / 1024} MiB limit for endpoints: pass large inputs by reference (a URL or a volume)`,
  requestIds: true,
};

/**
 * Requests whose URL matches `pattern` get their body as the request stream itself, read by the
 * route as it arrives (a map's inputs: far more than one buffer should hold), whatever its type.
 */
export function installStreamBody(fastify: FastifyInstance, route: { pattern: RegExp; name: string }): void {
  const streamType = `application/x-tern-${route.name}-stream`;
  if (fastify.hasContentTypeParser(streamType)) return;
  fastify.addHook('onRequest', async (request) => {
    if (!route.pattern.test(request.url)) return;
    (request as Tagged)[ORIGINAL_TYPE] = request.headers['content-type'];
    request.headers['content-type'] = streamType;
  });
  fastify.addContentTypeParser(streamType, (_request, payload, done) => done(null, payload));
}
