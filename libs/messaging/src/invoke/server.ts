import { Logger } from '@nestjs/common';
import { headers as natsHeaders, type Msg, type MsgHdrs, type Subscription } from '@nats-io/transport-node';
import {
  type Contract,
  describeHeadProblems,
  INVOKE,
  INVOKE_HEADERS,
  type InvokeHead,
  invokeHeadProblems,
  type InvokeResponseHead,
  subjectFilter,
} from '#tern/contracts';
import { type Decoded } from '../codec.js';
import type { Messaging } from '../messaging.js';
import { bodyObjectName, takeBody } from './bodies.js';
import type { InvokeTarget } from './client.js';
import { CHUNK_BYTES, errorHeaders, headerJson, InvokeError, KEEPALIVE_MS, MAX_RESPONSE_BYTES } from './protocol.js';
import { fireAndForget, Ticker } from '#tern/timing';

export interface InvokeHandlerResult {
  status: number;
  headers: Record<string, string>;
  /** A whole body, or chunks sent on as they are produced (SSE, chunked responses). */
  body: AsyncIterable<Uint8Array> | Uint8Array;
}

/**
 * Answers one request. `signal` fires when the head's timeout passes or the caller cancels
 * (its reason an InvokeError: 504 or 499), so the handler can drop its call to the container.
 * Throw InvokeError to choose the status of the error end.
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
 * subject is the container's own), or for every id of the machine when `containerId` is absent
 * (a builder answers every build sent to it). Each request's response is streamed to its reply
 * inbox: see INVOKE.
 */
export function serveInvoke(
  messaging: Messaging,
  target: Pick<InvokeTarget, 'machineId'> & Partial<InvokeTarget>,
  handler: InvokeHandler,
  fetchBody: BodyFetcher = (ref) => takeBody(messaging, bodyObjectName(target.machineId, ref)),
  contract: Contract<InvokeHead, InvokeResponseHead> = INVOKE,
  maxResponseBytes = MAX_RESPONSE_BYTES,
): Subscription {
  const subject = messaging.ns.subject(subjectFilter(contract, target.machineId, target.containerId));
  // The requests this subscription is answering, by reply subject: what a cancel names.
  const answering = new Map<string, Answer>();
  return messaging.nc.subscribe(subject, {
    callback: (err, msg) => {
      if (err) return logger.error(`subscription ${subject} failed: ${err.message}`);
      const cancel = msg.headers?.get(INVOKE_HEADERS.cancel);
      // Cancels follow their request on the same connection, so it is registered already (or done).
      if (cancel) return answering.get(cancel)?.cancel();
      if (!msg.reply) return logger.warn(`request on ${subject} without a reply subject dropped`);
      const reply = msg.reply;
      const answer = new Answer(messaging.nc, msg, reply);
      answering.set(reply, answer);
      fireAndForget(
        `answering on ${subject}`,
        logger,
        answer.run(handler, fetchBody, maxResponseBytes).finally(() => answering.delete(reply)),
      );
    },
  });
}

/**
 * Every request this process is answering, looked at by one sweep (running while there are any)
 * that sends the keepalives and ends overdue requests: no interval and timeout per request.
 */
class AnswerClock {
  private readonly answering = new Set<Answer>();
  private running = false;
  private readonly ticker = new Ticker({ name: 'invoke keepalive sweep', everyMs: SWEEP_MS, logger, unref: true }, () => this.sweep());

  add(a: Answer): void {
    this.answering.add(a);
    if (this.running) return;
    this.running = true;
    this.ticker.start();
  }

  delete(a: Answer): void {
    this.answering.delete(a);
  }

  private sweep(): void {
    if (!this.answering.size) {
      this.running = false;
      fireAndForget('stopping the keepalive sweep', logger, this.ticker.stop());
      return;
    }
    const now = performance.now();
    for (const a of this.answering) a.tick(now);
  }
}

/** How often requests being answered are looked at: a timeout's 504 comes at most this much late. */
const SWEEP_MS = 100;
const clock = new AnswerClock();
const EMPTY = new Uint8Array();

/** One request being answered: its response messages, numbered from 0, to its reply inbox. */
class Answer {
  private seq = 0;
  private ended = false;
  private readonly abort = new AbortController();
  private deadline = Infinity;
  private lastSent: number;
  private timeoutMs = 0;

  constructor(
    private readonly nc: Messaging['nc'],
    private readonly msg: Msg,
    private readonly reply: string,
  ) {
    this.lastSent = performance.now();
  }

  async run(handler: InvokeHandler, fetchBody: BodyFetcher, maxResponseBytes: number): Promise<void> {
    const parsed = parseHead(this.msg.headers?.get(INVOKE_HEADERS.head));
    if (!parsed.ok) return this.sendError(400, `invalid invoke head: ${parsed.reason}`);
    const head = parsed.value;
    this.timeoutMs = head.timeoutMs;
    this.deadline = this.lastSent + head.timeoutMs;
    clock.add(this);
    try {
      await this.answer(head, handler, fetchBody, maxResponseBytes);
    } catch (e) {
      if (e instanceof InvokeError) return this.sendError(e.code, e.message);
      if (this.abort.signal.aborted) return this.sendError(504, `no complete response within ${head.timeoutMs} ms`);
      logger.warn(`request ${head.requestId} failed: ${(e as Error).stack ?? e}`);
      this.sendError(500, `handler failed: ${(e as Error).message ?? e}`);
    } finally {
      clock.delete(this);
    }
  }

  /** The caller no longer wants the answer: stop the handler's work, send nothing more. */
  cancel(): void {
    if (this.ended) return;
    this.ended = true;
    this.abort.abort(new InvokeError(499, 'the caller cancelled the request (its client went away or a limit of its passed)'));
  }

  /** Called by the sweep: a keepalive while working, a 504 once the head's timeout has passed. */
  tick(now: number): void {
    if (this.ended) return;
    if (now >= this.deadline) {
      const message = `no complete response within ${this.timeoutMs} ms`;
      this.abort.abort(new InvokeError(504, message));
      this.sendError(504, message);
    } else if (now - this.lastSent >= KEEPALIVE_MS) {
      this.lastSent = now;
      try {
        this.nc.publish(this.reply, EMPTY, { headers: keepaliveHeaders() });
      } catch {
        // The connection closed: nobody can be told anything more; stop the handler's work.
        this.ended = true;
        this.abort.abort(new InvokeError(502, 'the connection to the caller closed'));
      }
    }
  }

  private async answer(head: InvokeHead, handler: InvokeHandler, fetchBody: BodyFetcher, maxResponseBytes: number): Promise<void> {
    let body = this.msg.data;
    if (head.bodyRef) {
      let stored: Uint8Array | null;
      try {
        stored = await fetchBody(head.bodyRef);
      } catch (e) {
        return this.sendError(502, `request body ${head.bodyRef} could not be fetched: ${(e as Error).message}`);
      }
      if (!stored) return this.sendError(400, `request body ${head.bodyRef} is not in the bodies store (expired?)`);
      body = stored;
    }
    if (body.length !== head.bodyBytes) return this.sendError(400, `request body is ${body.length} bytes, head says ${head.bodyBytes}`);
    const result = await handler(head, body, this.abort.signal);
    if (this.ended) return;
    const status = String(result.status);
    const headers = headerJson(result.headers);
    const withHead = (h: MsgHdrs) => {
      h.set(INVOKE_HEADERS.status, status);
      h.set(INVOKE_HEADERS.headers, headers);
    };
    if (result.body instanceof Uint8Array) {
      if (result.body.length > maxResponseBytes)
        return this.sendError(502, `response body of ${result.body.length} bytes is over the ${maxResponseBytes}-byte limit`);
      const parts = split(result.body);
      this.ended = true;
      parts.forEach((part, i) => {
        this.send(part, (h) => {
          if (i === 0) withHead(h);
          if (i === parts.length - 1) h.set(INVOKE_HEADERS.end, '1');
        });
      });
      return;
    }
    // Streaming: the head goes at once so the caller can start its reply before the body exists.
    this.send(EMPTY, withHead);
    let total = 0;
    for await (const piece of result.body) {
      if (this.ended) return;
      total += piece.length;
      if (total > maxResponseBytes) {
        this.abort.abort(new InvokeError(502, `response body is over the ${maxResponseBytes}-byte limit`));
        return this.sendError(502, `response body is over the ${maxResponseBytes}-byte limit`);
      }
      for (const part of split(piece)) this.send(part, () => undefined);
    }
    if (this.ended) return;
    this.ended = true;
    this.send(EMPTY, (h) => h.set(INVOKE_HEADERS.end, '1'));
  }

  private send(data: Uint8Array, fill: (h: MsgHdrs) => void): void {
    const h = natsHeaders();
    h.set(INVOKE_HEADERS.seq, String(this.seq++));
    fill(h);
    this.lastSent = performance.now();
    this.nc.publish(this.reply, data, { headers: h });
  }

  private sendError(code: number, message: string): void {
    if (this.ended) return;
    this.ended = true;
    this.nc.publish(this.reply, EMPTY, { headers: errorHeaders(this.seq++, code, message) });
  }
}

function keepaliveHeaders(): MsgHdrs {
  const h = natsHeaders();
  h.set(INVOKE_HEADERS.keepalive, '1');
  return h;
}

/** Checked synchronously by InvokeHead's hand-written rules (see invokeHeadProblems). */
function parseHead(raw: string | undefined): Decoded<InvokeHead> {
  if (!raw) return { ok: false, reason: `missing ${INVOKE_HEADERS.head} header` };
  let plain: unknown;
  try {
    plain = JSON.parse(raw);
  } catch (e) {
    return { ok: false, reason: `${INVOKE_HEADERS.head} is not JSON (${(e as Error).message})` };
  }
  if (plain === null || typeof plain !== 'object' || Array.isArray(plain)) return { ok: false, reason: 'payload must be a JSON object' };
  const problems = invokeHeadProblems(plain as Record<string, unknown>);
  return problems.length ? { ok: false, reason: describeHeadProblems(problems) } : { ok: true, value: plain as InvokeHead };
}

/** Chunks of at most CHUNK_BYTES; always at least one (an empty body is one empty chunk). */
function split(body: Uint8Array): Uint8Array[] {
  if (body.length <= CHUNK_BYTES) return [body];
  const parts: Uint8Array[] = [];
  for (let at = 0; at < body.length; at += CHUNK_BYTES) parts.push(body.subarray(at, at + CHUNK_BYTES));
  return parts;
}
