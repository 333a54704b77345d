import { plainToInstance } from 'class-transformer';
import { validateSync } from 'class-validator';
import { createInbox, headers as natsHeaders, type Msg } from '@nats-io/transport-node';
import { type Contract, INVOKE, INVOKE_HEADERS, type InvokeHead, InvokeResponseHead } from '#tern/contracts';
import { type Decoded, describeValidationErrors } from '../codec.js';
import type { Messaging } from '../messaging.js';
import { bodyObjectName, putBody } from './bodies.js';
import { ChunkQueue } from './chunk-queue.js';
import { headerJson, inlineBodyLimit, InvokeError, KEEPALIVE_MS } from './protocol.js';

export interface InvokeResponse {
  readonly status: number;
  readonly headers: Record<string, string>;
  /** Body chunks as the container produces them; throws InvokeError when the stream breaks. */
  readonly body: AsyncIterable<Uint8Array>;
}

export interface InvokeOptions {
  signal?: AbortSignal;
  /** Longest silence from the server, keepalives included (default 3 keepalive periods); the request's own timeout is the server's to enforce. */
  idleTimeoutMs?: number;
  /** The subject family: INVOKE (an endpoint's container) by default, SANDBOX_CALL for a sandbox's API. */
  contract?: Contract<InvokeHead, InvokeResponseHead>;
}

/** What the caller says about a request; the body's size and where it travels are filled in. */
/** The container a request goes to, and the machine it runs on (the subject names both). */
export interface InvokeTarget {
  machineId: string;
  containerId: string;
}

export type InvokeRequestHead = Omit<InvokeHead, 'bodyBytes' | 'bodyRef'>;

/**
 * Sends one request to a container's agent and resolves with the response head once it
 * arrives; the body streams on. Rejects with InvokeError: 503 when nobody serves the
 * container, 504 when a message is overdue, the agent's code for an error end, 499 when
 * aborted, 502 for a broken stream.
 */
export async function invoke(
  messaging: Messaging,
  target: InvokeTarget,
  request: InvokeRequestHead,
  body: Uint8Array,
  opts: InvokeOptions = {},
): Promise<InvokeResponse> {
  const { nc } = messaging;
  const { containerId } = target;
  const head: InvokeHead = { ...request, bodyBytes: body.length };
  let data = body;
  if (body.length > inlineBodyLimit(nc)) {
    await putBody(messaging, bodyObjectName(target.machineId, request.requestId), body);
    head.bodyRef = request.requestId;
    data = new Uint8Array();
  }
  if (opts.signal?.aborted) throw new InvokeError(499, 'request aborted');

  // The server sends a keepalive every KEEPALIVE_MS while it works (and enforces the request's
  // timeout itself), so a few missed ones mean its agent is gone: fail fast instead of hanging.
  const idleMs = opts.idleTimeoutMs ?? KEEPALIVE_MS * 3;
  // Under its own inbox prefix: its NATS user may subscribe to no other inbox.
  const inbox = createInbox(messaging.inboxPrefix);
  const chunks = new ChunkQueue(() => finish());
  let nextSeq = 0;
  let timer: NodeJS.Timeout | undefined;
  let settled = false;
  let resolveHead!: (r: InvokeResponse) => void;
  let rejectHead!: (e: InvokeError) => void;
  const headPromise = new Promise<InvokeResponse>((resolve, reject) => {
    resolveHead = resolve;
    rejectHead = reject;
  });

  const sub = nc.subscribe(inbox, { callback: (_err, msg) => onMessage(msg) });
  const onAbort = () => fail(new InvokeError(499, 'request aborted'));
  opts.signal?.addEventListener('abort', onAbort, { once: true });

  let finished = false;
  function finish() {
    clearTimeout(timer);
    if (finished) return;
    finished = true;
    opts.signal?.removeEventListener('abort', onAbort);
    sub.unsubscribe();
  }
  function fail(e: InvokeError) {
    finish();
    if (!settled) {
      settled = true;
      rejectHead(e);
    }
    chunks.fail(e);
  }
  function armTimer() {
    clearTimeout(timer);
    timer = setTimeout(
      () => fail(new InvokeError(502, `container ${containerId} stopped answering (nothing for ${idleMs} ms: its agent may be gone)`)),
      idleMs,
    );
  }

  function onMessage(msg: Msg) {
    const h = msg.headers;
    if (h && !h.get(INVOKE_HEADERS.seq) && h.code === 503) {
      return fail(new InvokeError(503, `container ${containerId} is not serving requests (no responders)`));
    }
    if (h?.get(INVOKE_HEADERS.keepalive)) return armTimer();
    const seq = Number(h?.get(INVOKE_HEADERS.seq));
    if (seq !== nextSeq)
      return fail(
        new InvokeError(
          502,
          `response from container ${containerId} out of order (got ${h?.get(INVOKE_HEADERS.seq) || 'none'}, expected ${nextSeq})`,
        ),
      );
    nextSeq++;
    armTimer();
    const error = h?.get(INVOKE_HEADERS.error);
    if (error) return fail(new InvokeError(Number(h?.get(INVOKE_HEADERS.errorCode)) || 502, error));
    if (seq === 0) {
      const parsed = parseResponseHead(h?.get(INVOKE_HEADERS.status), h?.get(INVOKE_HEADERS.headers));
      if (!parsed.ok) return fail(new InvokeError(502, `invalid response head from container ${containerId}: ${parsed.reason}`));
      settled = true;
      resolveHead({ ...parsed.value, body: chunks });
    }
    if (msg.data.length) chunks.push(msg.data);
    if (h?.get(INVOKE_HEADERS.end)) {
      finish();
      chunks.end();
    }
  }

  const h = natsHeaders();
  h.set(INVOKE_HEADERS.head, headerJson(head));
  armTimer();
  try {
    nc.publish(messaging.subject(opts.contract ?? INVOKE, [target.machineId, containerId]), data, { reply: inbox, headers: h });
  } catch (e) {
    fail(new InvokeError(502, `cannot send to container ${containerId}: ${(e as Error).message}`));
  }
  return headPromise;
}

/** Validated synchronously (its rules are all synchronous) so messages are handled strictly in order. */
function parseResponseHead(status: string | undefined, headers: string | undefined): Decoded<InvokeResponseHead> {
  let plain: object;
  try {
    plain = { status: Number(status), headers: JSON.parse(headers || '{}') };
  } catch (e) {
    return { ok: false, reason: `Tern-Headers is not JSON (${(e as Error).message})` };
  }
  const value = plainToInstance(InvokeResponseHead, plain);
  const errors = validateSync(value, { whitelist: true, forbidNonWhitelisted: true });
  if (errors.length) return { ok: false, reason: describeValidationErrors(errors).join('; ') };
  return { ok: true, value };
}
