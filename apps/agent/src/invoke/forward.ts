import { Agent, type Dispatcher, Pool } from 'undici';
import type { InvokeHead } from '#tern/contracts';
import { CHUNK_BYTES, ChunkQueue, InvokeError, type InvokeHandler, type InvokeHandlerResult } from '#tern/messaging';

/** Where a container's runner listens: its own address on the agent's bridge, or loopback with host networking. */
export interface ContainerEndpoint {
  host: string;
  port: number;
}

const CONNECTION_OPTIONS = { keepAliveTimeout: 10_000, headersTimeout: 0, bodyTimeout: 0 };

/**
 * Kept-alive connections to the containers, a pool per container address (undici's: a request
 * is a call on a parser already in place, where node:http builds a ClientRequest, an
 * IncomingMessage and their streams each time). No timeouts of its own: the head's timeout
 * (the signal) governs a request, however long it allows.
 */
export const containerAgent = new Agent(CONNECTION_OPTIONS);

/** Bodies up to one response message are read whole and sent with the head; longer ones stream. */
const WHOLE_BODY_BYTES = CHUNK_BYTES;
/** How many bytes of a streamed body may wait for the caller before the container is read no further. */
const STREAM_HIGH_WATER_BYTES = 4 * CHUNK_BYTES;

// Connection-level headers that describe the hop to the container, not the response.
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'upgrade', 'proxy-connection', 'te', 'trailer']);
// Request headers undici refuses (they would change how the connection is used) or that would
// make the container wait for a 100-continue nobody asked for: the agent owns its connections.
const NOT_SENT = ['connection', 'keep-alive', 'transfer-encoding', 'upgrade', 'expect', 'host', 'content-length'];

/**
 * Forwards one invoke to `http://<host>:<port><path>`: resolves once the container's status
 * and headers arrive, the body then streams chunk by chunk as the container writes it (SSE and
 * chunked responses pass through as produced). `signal` (the head's timeout, or the caller's
 * cancel) ends the call and closes its connection, so the container sees its client go away; a
 * container that refuses the connection gives 502.
 */
export function forwardToContainer(
  { host, port }: ContainerEndpoint,
  head: InvokeHead,
  body: Uint8Array,
  signal: AbortSignal,
  dispatcher: Dispatcher = containerAgent,
): Promise<InvokeHandlerResult> {
  return new Promise((resolve, reject) => {
    const call = new ContainerCall(port, head.timeoutMs, signal, resolve, reject);
    if (signal.aborted) return reject(call.stopped());
    call.start();
    const headers: Record<string, string> = { ...head.headers };
    for (const name of NOT_SENT) delete headers[name];
    // The body as the message brought it (a view of NATS's read buffer, not a copy).
    dispatcher.dispatch({ origin: originOf({ host, port }), method: head.method, path: head.path, headers, body }, call);
  });
}

/**
 * One request to a container, as undici's dispatch handler: the head resolves the forward, the
 * body is either gathered whole (small, known length) or handed on as a ChunkQueue.
 */
class ContainerCall implements Dispatcher.DispatchHandlers {
  private abortRequest?: (e?: Error) => void;
  private readonly onAbort = () => {
    if (this.abortRequest) return this.abortRequest(this.stopped());
    // Still waiting for a connection: answer now; onConnect ends the request if it gets one.
    this.reject(this.stopped());
  };
  private status = 0;
  private headers: Record<string, string> = {};
  private parts?: Buffer[];
  private stream?: ChunkQueue;
  private ended = false;

  constructor(
    private readonly port: number,
    private readonly timeoutMs: number,
    private readonly signal: AbortSignal,
    private readonly resolve: (r: InvokeHandlerResult) => void,
    private readonly reject: (e: InvokeError) => void,
  ) {}

  /** Why the signal ended the call: its reason (a cancel, a limit), else the head's timeout. */
  stopped(): InvokeError {
    const reason: unknown = this.signal.reason;
    return reason instanceof InvokeError ? reason : new InvokeError(504, `the container did not answer within ${this.timeoutMs} ms`);
  }

  /** Listens for the timeout from the moment the request is queued (it may wait for a connection). */
  start(): void {
    this.signal.addEventListener('abort', this.onAbort, { once: true });
  }

  onConnect(abort: (e?: Error) => void): void {
    // Called when the request gets a connection (again if undici retries it on a fresh one): a
    // timeout that passed while it was queued ends it here.
    this.abortRequest = abort;
    if (this.signal.aborted) abort(this.stopped());
  }

  onHeaders(status: number, raw: Buffer[], resume: () => void): boolean {
    if (status < 200) return true; // 100 Continue and the like: the real head follows
    this.status = status;
    let chunked = false;
    let length = NaN;
    for (let i = 0; i < raw.length; i += 2) {
      const name = raw[i]!.toString('latin1').toLowerCase();
      const value = raw[i + 1]!.toString('latin1');
      if (name === 'transfer-encoding') chunked = true;
      else if (name === 'content-length') length = Number(value);
      if (HOP_BY_HOP.has(name)) continue;
      const before = this.headers[name];
      this.headers[name] = before === undefined ? value : `${before}, ${value}`;
    }
    // A body of known, small length goes whole, in one message with the head (NaN: no length).
    if (!chunked && length <= WHOLE_BODY_BYTES) {
      this.parts = [];
      return true;
    }
    // Read no further while more than STREAM_HIGH_WATER_BYTES wait for the caller; a caller that
    // leaves before the end drops the call (and its connection).
    this.stream = new ChunkQueue(
      () => {
        if (!this.ended) this.abortRequest?.(new InvokeError(499, 'the response is no longer wanted'));
      },
      { highWaterBytes: STREAM_HIGH_WATER_BYTES, resume },
    );
    this.resolve({ status, headers: this.headers, body: this.stream });
    return true;
  }

  onData(chunk: Buffer): boolean {
    if (this.parts) {
      this.parts.push(chunk);
      return true;
    }
    return this.stream!.push(chunk);
  }

  onComplete(): void {
    this.done();
    if (this.stream) return this.stream.end();
    const parts = this.parts ?? [];
    this.resolve({ status: this.status, headers: this.headers, body: parts.length === 1 ? parts[0]! : Buffer.concat(parts) });
  }

  onError(e: Error & { code?: string }): void {
    this.done();
    const error = e instanceof InvokeError ? e : this.failure(e);
    if (this.stream) return this.stream.fail(error);
    this.reject(error);
  }

  private failure(e: Error & { code?: string }): InvokeError {
    if (this.status) return new InvokeError(502, `the container's response broke off: ${e.message}`);
    if (e.code === 'ECONNREFUSED')
      return new InvokeError(
        502,
        `the container refused the connection on port ${this.port} (not listening: starting, crashed or stopped)`,
      );
    if (e.code === 'ECONNRESET' || e.code === 'EPIPE' || e.code === 'UND_ERR_SOCKET')
      return new InvokeError(502, `the container closed the connection before answering (${e.code})`);
    return new InvokeError(502, `could not reach the container on port ${this.port}: ${e.message}`);
  }

  private done(): void {
    this.ended = true;
    this.signal.removeEventListener('abort', this.onAbort);
  }
}

function originOf({ host, port }: ContainerEndpoint): string {
  return `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
}

/** A container's invoke handler, and how to let go of its connections once it stops serving. */
export interface ContainerForwarder {
  handler: InvokeHandler;
  close(): Promise<void>;
}

/**
 * The invoke handler for the container at `endpoint`, on its own pool of at most `connections`
 * kept-alive connections: as many as the requests it takes at once. Tern's runners give each
 * accepted connection one of their request slots until it closes, so an idle kept-alive
 * connection beyond that count would hold the slot a new connection waits for, until the
 * keep-alive ran out (10 s). Requests past the count wait here for a connection instead.
 */
export function containerForwarder(endpoint: ContainerEndpoint, connections: number): ContainerForwarder {
  const pool = new Pool(originOf(endpoint), { ...CONNECTION_OPTIONS, connections: Math.max(1, connections) });
  return {
    handler: (head, body, signal) => forwardToContainer(endpoint, head, body, signal, pool),
    // Lets requests in flight finish (a container stopping gracefully answers them).
    close: () => pool.close(),
  };
}
