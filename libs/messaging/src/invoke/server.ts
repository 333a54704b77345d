import { Logger } from '@nestjs/common';
import { headers as natsHeaders, type Msg, type Subscription } from '@nats-io/transport-node';
import { type Contract, INVOKE, INVOKE_HEADERS, InvokeHead, type InvokeResponseHead } from '#tern/contracts';
import { validatePayload } from '../codec.js';
import type { Messaging } from '../messaging.js';
import { bodyObjectName, takeBody } from './bodies.js';
import type { InvokeTarget } from './client.js';
import { CHUNK_BYTES, errorHeaders, headerJson, InvokeError, KEEPALIVE_MS, MAX_RESPONSE_BYTES } from './protocol.js';
import { fireAndForget } from '#tern/timing';

export interface InvokeHandlerResult {
  status: number;
  headers: Record<string, string>;
  /** A whole body, or chunks sent on as they are produced (SSE, chunked responses). */
  body: AsyncIterable<Uint8Array> | Uint8Array;
}

/**
 * Answers one request. `signal` fires when the head's timeout passes, so the handler can
 * drop its call to the container. Throw InvokeError to choose the status of the error end.
 */
export type InvokeHandler = (head: InvokeHead, body: Uint8Array, signal: AbortSignal) => Promise<InvokeHandlerResult>;

/**
 * Gets (once) the body of a request too large for one message, by its `bodyRef` (the request
 * id); null when it is gone. An agent asks the gateway (its NATS user cannot read the store).
 */
export type BodyFetcher = (bodyRef: string) => Promise<Uint8Array | null>;

const logger = new Logger('invoke');

/**
 * Serves `tern.agent.<machineId>.invoke.<containerId>.v1` for one container (no queue group: the
 * subject is the container's own). Each request's response is streamed to its reply inbox: see INVOKE.
 */
export function serveInvoke(
  messaging: Messaging,
  target: InvokeTarget,
  handler: InvokeHandler,
  fetchBody: BodyFetcher = (ref) => takeBody(messaging, bodyObjectName(target.machineId, ref)),
  contract: Contract<InvokeHead, InvokeResponseHead> = INVOKE,
  maxResponseBytes = MAX_RESPONSE_BYTES,
): Subscription {
  const subject = messaging.subject(contract, [target.machineId, target.containerId]);
  return messaging.nc.subscribe(subject, {
    callback: (err, msg) => {
      if (err) return logger.error(`subscription ${subject} failed: ${err.message}`);
      if (!msg.reply) return logger.warn(`request on ${subject} without a reply subject dropped`);
      fireAndForget(`answering on ${subject}`, logger, answer(messaging, msg, msg.reply, handler, fetchBody, maxResponseBytes));
    },
  });
}

async function answer(
  messaging: Messaging,
  msg: Msg,
  reply: string,
  handler: InvokeHandler,
  fetchBody: BodyFetcher,
  maxResponseBytes: number,
): Promise<void> {
  const nc = messaging.nc;
  let seq = 0;
  let ended = false;
  const send = (data: Uint8Array, fill: (h: ReturnType<typeof natsHeaders>) => void) => {
    const h = natsHeaders();
    h.set(INVOKE_HEADERS.seq, String(seq++));
    fill(h);
    nc.publish(reply, data, { headers: h });
  };
  const sendError = (code: number, message: string) => {
    if (ended) return;
    ended = true;
    nc.publish(reply, new Uint8Array(), { headers: errorHeaders(seq++, code, message) });
  };

  const parsed = await parseHead(msg.headers?.get(INVOKE_HEADERS.head));
  if (!parsed.ok) return sendError(400, `invalid invoke head: ${parsed.reason}`);
  const head = parsed.value;

  const abort = new AbortController();
  const keepalive = setInterval(() => {
    if (ended) return;
    const h = natsHeaders();
    h.set(INVOKE_HEADERS.keepalive, '1');
    nc.publish(reply, new Uint8Array(), { headers: h });
  }, KEEPALIVE_MS);
  const timer = setTimeout(() => {
    abort.abort();
    sendError(504, `no complete response within ${head.timeoutMs} ms`);
  }, head.timeoutMs);
  try {
    let body = msg.data;
    if (head.bodyRef) {
      let stored: Uint8Array | null;
      try {
        stored = await fetchBody(head.bodyRef);
      } catch (e) {
        return sendError(502, `request body ${head.bodyRef} could not be fetched: ${(e as Error).message}`);
      }
      if (!stored) return sendError(400, `request body ${head.bodyRef} is not in the bodies store (expired?)`);
      body = stored;
    }
    if (body.length !== head.bodyBytes) return sendError(400, `request body is ${body.length} bytes, head says ${head.bodyBytes}`);

    const result = await handler(head, body, abort.signal);
    if (ended) return;
    const status = String(result.status);
    const headers = headerJson(result.headers);
    const withHead = (h: ReturnType<typeof natsHeaders>) => {
      h.set(INVOKE_HEADERS.status, status);
      h.set(INVOKE_HEADERS.headers, headers);
    };

    if (result.body instanceof Uint8Array) {
      if (result.body.length > maxResponseBytes)
        return sendError(502, `response body of ${result.body.length} bytes is over the ${maxResponseBytes}-byte limit`);
      const parts = split(result.body);
      parts.forEach((part, i) => {
        send(part, (h) => {
          if (i === 0) withHead(h);
          if (i === parts.length - 1) h.set(INVOKE_HEADERS.end, '1');
        });
      });
      ended = true;
      return;
    }

    // Streaming: the head goes at once so the caller can start its reply before the body exists.
    send(new Uint8Array(), withHead);
    let total = 0;
    for await (const piece of result.body) {
      if (ended) return;
      total += piece.length;
      if (total > maxResponseBytes) {
        abort.abort();
        return sendError(502, `response body is over the ${maxResponseBytes}-byte limit`);
      }
      for (const part of split(piece)) send(part, () => undefined);
    }
    if (ended) return;
    ended = true;
    send(new Uint8Array(), (h) => h.set(INVOKE_HEADERS.end, '1'));
  } catch (e) {
    if (e instanceof InvokeError) return sendError(e.code, e.message);
    if (abort.signal.aborted) return sendError(504, `no complete response within ${head.timeoutMs} ms`);
    logger.warn(`request ${head.requestId} failed: ${(e as Error).stack ?? e}`);
    sendError(500, `handler failed: ${(e as Error).message ?? e}`);
  } finally {
    clearTimeout(timer);
    clearInterval(keepalive);
  }
}

async function parseHead(raw: string | undefined) {
  if (!raw) return { ok: false as const, reason: `missing ${INVOKE_HEADERS.head} header` };
  let plain: unknown;
  try {
    plain = JSON.parse(raw);
  } catch (e) {
    return { ok: false as const, reason: `${INVOKE_HEADERS.head} is not JSON (${(e as Error).message})` };
  }
  return validatePayload(InvokeHead, plain);
}

/** Chunks of at most CHUNK_BYTES; always at least one (an empty body is one empty chunk). */
function split(body: Uint8Array): Uint8Array[] {
  if (body.length <= CHUNK_BYTES) return [body];
  const parts: Uint8Array[] = [];
  for (let at = 0; at < body.length; at += CHUNK_BYTES) parts.push(body.subarray(at, at + CHUNK_BYTES));
  return parts;
}
