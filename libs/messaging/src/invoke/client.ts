import { headers as natsHeaders, type Msg } from '@nats-io/transport-node';
import {
  type Contract,
  INVOKE,
  INVOKE_HEADERS,
  type InvokeHead,
  type InvokeResponseHead,
  invokeResponseHeadProblems,
  describeHeadProblems,
} from '#tern/contracts';
import { type Decoded } from '../codec.js';
import type { Messaging } from '../messaging.js';
import { bodyObjectName, putBody } from './bodies.js';
import { ChunkQueue } from './chunk-queue.js';
import { headerJson, inlineBodyLimit, InvokeError, KEEPALIVE_MS } from './protocol.js';
import { ReplyInbox } from './reply-inbox.js';

export interface InvokeResponse {
  readonly status: number;
  readonly headers: Record<string, string>;
  /** Body chunks as the container produces them; throws InvokeError when the stream breaks. */
  readonly body: AsyncIterable<Uint8Array>;
  /** The whole body, when it came with the head in one message (`body` yields the same bytes). */
  readonly whole?: Uint8Array;
}

export interface InvokeOptions {
  /** Ends the call (and tells the server to stop: see INVOKE's cancel); an InvokeError as its reason is what the call fails with, else 499. */
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
 * container, 504 when a message is overdue, the agent's code for an error end, 499 (or the
 * signal's InvokeError) when aborted, 502 for a broken stream. A call given up before the
 * server ended it (aborted, or its body left unread) is cancelled on the server too.
 */
export async function invoke(
  messaging: Messaging,
  target: InvokeTarget,
  request: InvokeRequestHead,
  body: Uint8Array,
  opts: InvokeOptions = {},
): Promise<InvokeResponse> {
  const { nc } = messaging;
  const head: InvokeHead = { ...request, bodyBytes: body.length };
  let data = body;
  if (body.length > inlineBodyLimit(nc)) {
    await putBody(messaging, bodyObjectName(target.machineId, request.requestId), body);
    head.bodyRef = request.requestId;
    data = new Uint8Array();
  }
  if (opts.signal?.aborted) throw opts.signal.reason instanceof InvokeError ? opts.signal.reason : new InvokeError(499, 'request aborted');
  return new InvokeCall(messaging, target, head, data, opts).response;
}

/**
 * One invoke in flight: its response messages arrive through the connection's ReplyInbox and
 * are checked in order; the head settles `response`, the body chunks feed its ChunkQueue.
 */
class InvokeCall {
  readonly response: Promise<InvokeResponse>;
  private readonly chunks = new ChunkQueue(() => this.finish());
  private readonly inbox: ReplyInbox;
  private readonly reply: string;
  private readonly containerId: string;
  private readonly subject: string;
  private readonly nc: Messaging['nc'];
  private readonly signal?: AbortSignal;
  private readonly onAbort = () => {
    const reason: unknown = this.signal?.reason;
    this.fail(reason instanceof InvokeError ? reason : new InvokeError(499, 'request aborted'));
  };
  private nextSeq = 0;
  private settled = false;
  private finished = false;
  /** The server sent its end (or an error end, or no responders): nothing there to cancel. */
  private serverDone = false;
  private resolveHead!: (r: InvokeResponse) => void;
  private rejectHead!: (e: InvokeError) => void;

  constructor(messaging: Messaging, target: InvokeTarget, head: InvokeHead, data: Uint8Array, opts: InvokeOptions) {
    this.containerId = target.containerId;
    this.nc = messaging.nc;
    this.subject = messaging.subject(opts.contract ?? INVOKE, [target.machineId, this.containerId]);
    this.signal = opts.signal;
    this.response = new Promise<InvokeResponse>((resolve, reject) => {
      this.resolveHead = resolve;
      this.rejectHead = reject;
    });
    this.inbox = ReplyInbox.of(messaging);
    // The server sends a keepalive every KEEPALIVE_MS while it works (and enforces the request's
    // timeout itself), so a few missed ones mean its agent is gone: fail fast instead of hanging.
    const idleMs = opts.idleTimeoutMs ?? KEEPALIVE_MS * 3;
    this.reply = this.inbox.add({
      idleMs,
      lastHeard: performance.now(),
      onMessage: (msg) => this.onMessage(msg),
      onIdle: () =>
        this.fail(
          new InvokeError(502, `container ${this.containerId} stopped answering (nothing for ${idleMs} ms: its agent may be gone)`),
        ),
    });
    this.signal?.addEventListener('abort', this.onAbort, { once: true });
    const h = natsHeaders();
    h.set(INVOKE_HEADERS.head, headerJson(head));
    try {
      messaging.nc.publish(this.subject, data, { reply: this.reply, headers: h });
    } catch (e) {
      this.serverDone = true;
      this.fail(new InvokeError(502, `cannot send to container ${this.containerId}: ${(e as Error).message}`));
    }
  }

  private finish(): void {
    if (this.finished) return;
    this.finished = true;
    this.signal?.removeEventListener('abort', this.onAbort);
    this.inbox.remove(this.reply);
    if (!this.serverDone) this.cancel();
  }

  /** Tells the server the answer is no longer wanted, so it stops the container's work (see INVOKE). */
  private cancel(): void {
    const h = natsHeaders();
    h.set(INVOKE_HEADERS.cancel, this.reply);
    try {
      this.nc.publish(this.subject, EMPTY, { headers: h });
    } catch {
      // The connection is closed: the server's keepalives fail too and it stops on its own.
    }
  }

  private fail(e: InvokeError): void {
    this.finish();
    if (!this.settled) {
      this.settled = true;
      this.rejectHead(e);
    }
    this.chunks.fail(e);
  }

  private onMessage(msg: Msg): void {
    const h = msg.headers;
    const containerId = this.containerId;
    if (h && !h.get(INVOKE_HEADERS.seq) && h.code === 503) {
      this.serverDone = true;
      return this.fail(new InvokeError(503, `container ${containerId} is not serving requests (no responders)`));
    }
    if (h?.get(INVOKE_HEADERS.keepalive)) return;
    const seq = Number(h?.get(INVOKE_HEADERS.seq));
    if (seq !== this.nextSeq)
      return this.fail(
        new InvokeError(
          502,
          `response from container ${containerId} out of order (got ${h?.get(INVOKE_HEADERS.seq) || 'none'}, expected ${this.nextSeq})`,
        ),
      );
    this.nextSeq++;
    const error = h?.get(INVOKE_HEADERS.error);
    if (error) this.serverDone = true;
    if (error) return this.fail(new InvokeError(Number(h?.get(INVOKE_HEADERS.errorCode)) || 502, error));
    const end = !!h?.get(INVOKE_HEADERS.end);
    if (seq === 0) {
      const parsed = parseResponseHead(h?.get(INVOKE_HEADERS.status), h?.get(INVOKE_HEADERS.headers));
      if (!parsed.ok) return this.fail(new InvokeError(502, `invalid response head from container ${containerId}: ${parsed.reason}`));
      this.settled = true;
      // The whole response in one message, the common case: the caller may answer without a stream.
      this.resolveHead({ ...parsed.value, body: this.chunks, ...(end ? { whole: msg.data } : {}) });
    }
    if (msg.data.length) this.chunks.push(msg.data);
    if (end) {
      this.serverDone = true;
      this.finish();
      this.chunks.end();
    }
  }
}

const EMPTY = new Uint8Array();

/** Checked synchronously so messages are handled strictly in order. */
function parseResponseHead(status: string | undefined, headers: string | undefined): Decoded<InvokeResponseHead> {
  let value: InvokeResponseHead;
  try {
    value = { status: Number(status), headers: JSON.parse(headers || '{}') as Record<string, string> };
  } catch (e) {
    return { ok: false, reason: `Tern-Headers is not JSON (${(e as Error).message})` };
  }
  const problems = invokeResponseHeadProblems(value);
  return problems.length ? { ok: false, reason: describeHeadProblems(problems) } : { ok: true, value };
}
