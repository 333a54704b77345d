import { BadRequestException } from '@nestjs/common';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import type { FastifyReply, FastifyRequest, RawServerDefault } from 'fastify';
import http, { type IncomingMessage } from 'node:http';
import { type Duplex, Stream } from 'node:stream';
import { bodyTextProblem, jsonValueProblem, pathEscapeProblem, urlInputProblem } from './bad-input.js';
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

/** The socket's byte count when its client error was answered; present while it lingers (see answerClientError). */
const answeredAt = new WeakMap<Duplex, number>();

/**
 * Answers a request Node could not parse (headers over its 16 KiB limit, a malformed request
 * line, bytes a URL may not hold), the connection being unusable after it. The answer says
 * `Connection: close` (Fastify's own does not, so a keep-alive client would send its next
 * request on a socket about to close), and the connection is not destroyed at once: closing
 * it while the client is still sending a body makes the kernel reset it, and the client loses
 * the answer. So the answer goes with a FIN, and what the client still sends is read and
 * dropped until it closes its side (having read the answer), within REFUSED_BODY_DISCARD.
 * Give as FastifyAdapter's `clientErrorHandler`.
 */
export function answerClientError(error: Error & { code?: string; rawPacket?: unknown }, socket: Duplex & { bytesRead?: number }): void {
  if (error.code === 'ECONNRESET' || socket.destroyed) return;
  // Node's parser stays attached and reports each later chunk of the same connection again.
  const answered = answeredAt.get(socket);
  if (answered !== undefined) {
    if ((socket.bytesRead ?? 0) - answered > REFUSED_BODY_DISCARD.maxBytes) socket.destroy();
    return;
  }
  const [status, message] =
    error.code === 'HPE_HEADER_OVERFLOW'
      ? [431, `request headers are over ${http.maxHeaderSize} bytes; send fewer or shorter headers`]
      : error.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? [408, 'the request took too long to arrive']
        : error.code === 'HPE_INVALID_URL'
          ? [400, 'the request URL holds a byte a URL may not (a space, a control character or a byte over 0x7f); percent-encode it']
          : [400, 'malformed HTTP request'];
  const body = JSON.stringify({ statusCode: status, error: http.STATUS_CODES[status], message });
  // A client that sent HEAD reads no body: bytes after the head would break its connection.
  const head = Buffer.isBuffer(error.rawPacket) && error.rawPacket.subarray(0, 5).toString('latin1') === 'HEAD ';
  if (!socket.writable) {
    socket.destroy();
    return;
  }
  answeredAt.set(socket, socket.bytesRead ?? 0);
  socket.end(
    `HTTP/1.1 ${status} ${http.STATUS_CODES[status]}\r\nConnection: close\r\nContent-Type: application/json\r\n` +
      `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${head ? '' : body}`,
  );
  // Both sides ended (the client closes once it has read the answer) closes the socket by itself;
  // a client that neither stops nor closes is cut off.
  const giveUp = setTimeout(() => socket.destroy(), REFUSED_BODY_DISCARD.maxMs).unref();
  socket.once('close', () => clearTimeout(giveUp));
  // Where no parser consumes the socket (TLS), its bytes come here; the count bounds them either way.
  socket.on('data', () => {
    if ((socket.bytesRead ?? 0) - answeredAt.get(socket)! > REFUSED_BODY_DISCARD.maxBytes) socket.destroy();
  });
  socket.resume();
}

/**
 * Answers what Fastify's router refuses before any hook runs: a path whose percent escapes are
 * malformed or decode to bytes that are not UTF-8 (400), a path parameter over the router's
 * maxParamLength (414). No hook runs for these, the onSend one included, so this says what to
 * fix and reads what is left of the body itself before answering (see installRequestIntake).
 * Give as FastifyAdapter's `frameworkErrors`.
 */
export function answerFrameworkError(
  error: Error & { code?: string; statusCode?: number },
  request: FastifyRequest,
  reply: FastifyReply,
): void {
  const url = request.raw.url ?? '/';
  const [status, message] =
    error.code === 'FST_ERR_BAD_URL'
      ? [
          400,
          urlInputProblem(url) ??
            pathEscapeProblem(url) ??
            'the URL path is not valid percent-encoded UTF-8; percent-encode the UTF-8 bytes of the text, and a literal % as %25',
        ]
      : error.code === 'FST_ERR_MAX_PARAM_LENGTH'
        ? [414, `a path parameter is over ${MAX_PARAM_LENGTH} characters; no id or name the API takes is that long`]
        : [error.statusCode ?? 400, error.message];
  readRestOfBody(request.raw)
    .then((whole) => {
      if (!whole) void reply.header('connection', 'close');
      void reply.code(status).send({ statusCode: status, error: http.STATUS_CODES[status], message });
    })
    .catch(() => request.raw.destroy());
}

/** The router's bound on one path parameter (Fastify's default, restated for the 414's message). */
export const MAX_PARAM_LENGTH = 100;

/**
 * Reads what is left of a request's body and drops it, within REFUSED_BODY_DISCARD: true once
 * it has all arrived (the connection may serve the next request), false when it would not.
 */
function readRestOfBody(raw: IncomingMessage): Promise<boolean> {
  if (raw.complete) return Promise.resolve(true);
  const declared = Number(raw.headers['content-length']);
  if (declared > REFUSED_BODY_DISCARD.maxBytes) return Promise.resolve(false);
  return discardBody(raw, REFUSED_BODY_DISCARD);
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
    if (reply.statusCode < 400) return payload;
    if (!(await readRestOfBody(request.raw))) void reply.header('connection', 'close');
    return payload;
  });
}

/** A string or a tree a parser built (of any prototype: forms parse to prototype-less objects); not bytes or a stream. */
function isParsedText(body: unknown): boolean {
  if (typeof body === 'string') return true;
  return typeof body === 'object' && body !== null && !ArrayBuffer.isView(body) && !(body instanceof Stream);
}
