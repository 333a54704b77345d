import { Agent, request, type IncomingHttpHeaders, type IncomingMessage } from 'node:http';
import type { InvokeHead } from '#tern/contracts';
import { CHUNK_BYTES, InvokeError, type InvokeHandler, type InvokeHandlerResult } from '#tern/messaging';

/** Where a container's runner listens: its own address on the agent's bridge, or loopback with host networking. */
export interface ContainerEndpoint {
  host: string;
  port: number;
}

/** Kept-alive connections to the containers: no TCP handshake per request. */
export const containerAgent = new Agent({ keepAlive: true, keepAliveMsecs: 10_000, maxFreeSockets: 64 });

/** Bodies up to one response message are read whole and sent with the head; longer ones stream. */
const WHOLE_BODY_BYTES = CHUNK_BYTES;

// Connection-level headers that describe the hop to the container, not the response.
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'upgrade', 'proxy-connection', 'te', 'trailer']);

function flatten(headers: IncomingHttpHeaders): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(headers)) {
    if (v === undefined || HOP_BY_HOP.has(k)) continue;
    out[k] = Array.isArray(v) ? v.join(', ') : v;
  }
  return out;
}

/**
 * Forwards one invoke to `http://<host>:<port><path>`: resolves once the container's status
 * and headers arrive, the body then streams chunk by chunk as the container writes it (SSE and
 * chunked responses pass through as produced). `signal` (the head's timeout) ends the call with
 * 504; a container that refuses the connection gives 502.
 */
export function forwardToContainer(
  { host, port }: ContainerEndpoint,
  head: InvokeHead,
  body: Uint8Array,
  signal: AbortSignal,
): Promise<InvokeHandlerResult> {
  return new Promise((resolve, reject) => {
    const timedOut = () => new InvokeError(504, `the container did not answer within ${head.timeoutMs} ms`);
    if (signal.aborted) return reject(timedOut());
    const headers: Record<string, string> = { ...head.headers, 'content-length': String(body.length) };
    delete headers['transfer-encoding'];
    delete headers.connection;
    const req = request({ host, port, method: head.method, path: head.path, headers, agent: containerAgent });
    const onAbort = () => req.destroy(timedOut());
    signal.addEventListener('abort', onAbort, { once: true });
    req.on('error', (e: NodeJS.ErrnoException) => {
      signal.removeEventListener('abort', onAbort);
      if (e instanceof InvokeError) return reject(e);
      if (e.code === 'ECONNREFUSED')
        return reject(
          new InvokeError(502, `the container refused the connection on port ${port} (not listening: starting, crashed or stopped)`),
        );
      if (e.code === 'ECONNRESET' || e.code === 'EPIPE')
        return reject(new InvokeError(502, `the container closed the connection before answering (${e.code})`));
      reject(new InvokeError(502, `could not reach the container on port ${port}: ${e.message}`));
    });
    req.on('response', (res) => {
      res.on('close', () => signal.removeEventListener('abort', onAbort));
      const status = res.statusCode ?? 502;
      const headers = flatten(res.headers);
      // A body of known, small length goes whole, in one message with the head (NaN: no length).
      if (!res.headers['transfer-encoding'] && Number(res.headers['content-length']) <= WHOLE_BODY_BYTES) {
        whole(res).then((body) => resolve({ status, headers, body }), reject);
        return;
      }
      resolve({ status, headers, body: chunks(res, signal, timedOut) });
    });
    req.end(body);
  });
}

/** The response body read to its end: the one chunk it came in as is, or the chunks joined. */
function whole(res: IncomingMessage): Promise<Uint8Array> {
  return new Promise((resolve, reject) => {
    const parts: Buffer[] = [];
    res.on('data', (chunk: Buffer) => parts.push(chunk));
    res.on('end', () => resolve(parts.length === 1 ? parts[0]! : Buffer.concat(parts)));
    res.on('error', (e) => reject(e instanceof InvokeError ? e : new InvokeError(502, `the container's response broke off: ${e.message}`)));
  });
}

/** The response body as it arrives; a timeout or a cut connection mid-body ends it with an error. */
async function* chunks(
  res: AsyncIterable<Buffer> & { destroy(e?: Error): void },
  signal: AbortSignal,
  timedOut: () => InvokeError,
): AsyncIterable<Uint8Array> {
  const onAbort = () => res.destroy(timedOut());
  signal.addEventListener('abort', onAbort, { once: true });
  try {
    for await (const chunk of res) yield new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength);
  } catch (e) {
    if (e instanceof InvokeError) throw e;
    throw new InvokeError(502, `the container's response broke off: ${(e as Error).message}`);
  } finally {
    signal.removeEventListener('abort', onAbort);
  }
}

/** The invoke handler for the container at `endpoint`. */
export function containerForwarder(endpoint: ContainerEndpoint): InvokeHandler {
  return (head, body, signal) => forwardToContainer(endpoint, head, body, signal);
}
