import { BadRequestException } from '@nestjs/common';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import type { FastifyRequest, RawServerDefault } from 'fastify';
import http from 'node:http';
import { type Duplex, Stream } from 'node:stream';
import { bodyTextProblem, jsonValueProblem, urlInputProblem } from './bad-input.js';
import { type DiscardBounds, discardBody } from './discard-body.js';

/** The most any route takes in one request: a JSON body (16 MiB) or a raw body of the same bound. */
export const HTTP_BODY_LIMIT = 16 * 1024 * 1024;

/**
 * How much of an unread body is still read (and thrown away) after an error answer: twice the
 * largest upload a route takes (code bundles, 64 MiB), and not for longer than a slow client
 * is worth holding a connection.
 */
export const REFUSED_BODY_DISCARD: DiscardBounds = { maxBytes: 128 * 1024 * 1024, maxMs: 10_000 };

const JSON_TYPE = 'application/json';

/**
 * Answers a request Node could not parse (headers over its 16 KiB limit, a malformed request
 * line), the connection being unusable after it. Fastify's own answer does not say
 * `Connection: close`, so a keep-alive client sends its next request on the socket Fastify
 * destroys, and gets a reset. Give as FastifyAdapter's `clientErrorHandler`.
 */
export function answerClientError(error: Error & { code?: string; rawPacket?: unknown }, socket: Duplex): void {
  if (error.code === 'ECONNRESET' || socket.destroyed) return;
  const [status, message] =
    error.code === 'HPE_HEADER_OVERFLOW'
      ? [431, `request headers are over ${http.maxHeaderSize} bytes; send fewer or shorter headers`]
      : error.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? [408, 'the request took too long to arrive']
        : [400, 'malformed HTTP request'];
  const body = JSON.stringify({ statusCode: status, error: http.STATUS_CODES[status], message });
  // A client that sent HEAD reads no body: bytes after the head would break its connection.
  const head = Buffer.isBuffer(error.rawPacket) && error.rawPacket.subarray(0, 5).toString('latin1') === 'HEAD ';
  if (socket.writable) {
    socket.write(
      `HTTP/1.1 ${status} ${http.STATUS_CODES[status]}\r\nConnection: close\r\nContent-Type: application/json\r\n` +
        `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${head ? '' : body}`,
    );
  }
  socket.destroy();
}

/**
 * Bad input is refused where it enters, for every route of every service, before a handler or
 * Postgres sees it (bad-input.ts says what counts as bad):
 * - path segments and query parameters with a NUL byte or bytes that are not UTF-8 → 400;
 * - JSON bodies that are not UTF-8 → 400 (the stock parser would decode bad bytes to U+FFFD);
 * - parsed bodies (JSON, forms, text) whose keys or strings hold a NUL or a lone surrogate, or
 *   that nest past MAX_JSON_DEPTH → 400;
 * - an error answer to a request whose body was not read whole (413 above all) waits until the
 *   rest has arrived, read and thrown away within REFUSED_BODY_DISCARD, so that the client,
 *   still sending, reads the answer instead of a reset connection. Past the bounds the
 *   connection is closed after the answer.
 * Errors thrown here are HttpExceptions, answered by Nest's exception filter like any other 400.
 */
export function installRequestIntake(app: NestFastifyApplication): void {
  const fastify = app.getHttpAdapter().getInstance();
  fastify.addHook('onRequest', async (request) => {
    const problem = urlInputProblem(request.url);
    if (problem) throw new BadRequestException(problem);
  });

  // In place of Nest's JSON parser (registered at init unless one is given here).
  // Fastify's parser is synchronous: it answers through `done` and returns nothing.
  const parseJson = fastify.getDefaultJsonParser('error', 'error') as (
    request: FastifyRequest,
    body: string,
    done: (error: Error | null, body?: unknown) => void,
  ) => void;
  app.useBodyParser<RawServerDefault>(JSON_TYPE, { bodyLimit: HTTP_BODY_LIMIT }, (request, body, done) => {
    const problem = bodyTextProblem(body);
    if (problem) return done(new BadRequestException(problem), undefined);
    parseJson(request, body.toString('utf8'), done);
  });

  // Whatever parser made the body (JSON, a form, text), before validation and the handler.
  fastify.addHook('preValidation', async (request) => {
    const body = request.body;
    if (!isParsedText(body)) return;
    const problem = jsonValueProblem(body);
    if (problem) throw new BadRequestException(problem);
  });

  fastify.addHook('onSend', async (request, reply, payload) => {
    if (reply.statusCode < 400 || request.raw.complete) return payload;
    const declared = Number(request.headers['content-length']);
    const worthReading = !(declared > REFUSED_BODY_DISCARD.maxBytes);
    if (!worthReading || !(await discardBody(request.raw, REFUSED_BODY_DISCARD))) void reply.header('connection', 'close');
    return payload;
  });
}

/** A string or a tree a parser built (of any prototype: forms parse to prototype-less objects); not bytes or a stream. */
function isParsedText(body: unknown): boolean {
  if (typeof body === 'string') return true;
  return typeof body === 'object' && body !== null && !ArrayBuffer.isView(body) && !(body instanceof Stream);
}
