import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { type TernConnection } from './config.js';
import { apiError, TernConnectionError } from './errors.js';

/** A handler's input: any JSON value but null (an object, an array, a number, a string, a boolean). */
export type Input = object | string | number | boolean;

/** What a request may carry: JSON (any value but null), raw bytes, or a stream of bytes sent as it is read. */
export type RequestBody = Input | Uint8Array | ReadableStream<Uint8Array> | undefined;

export interface SendOptions {
  /** Give up after this long; none by default for streams, 30 s for `request`. */
  timeoutMs?: number;
  /** The body's type when it is bytes or a stream (default application/octet-stream). */
  contentType?: string;
  headers?: Record<string, string>;
}

/** How long a plain JSON request may take; long polls ask the gateway for less. */
export const REQUEST_TIMEOUT_MS = 30_000;

/** An answer's JSON, or its text when it is not JSON. */
export function parseJson(text: string): unknown {
  try {
    return text ? JSON.parse(text) : undefined;
  } catch {
    return text;
  }
}

/** The gateway's message from an error answer's text (JSON `message`, a string or a list), as a typed error. */
export function failure(response: Response, text: string) {
  const parsed = parseJson(text);
  const message = (parsed as { message?: unknown } | undefined)?.message;
  const said = Array.isArray(message)
    ? message.join('; ')
    : typeof message === 'string'
      ? message
      : typeof parsed === 'string'
        ? parsed
        : '';
  return apiError(response.status, `${response.status} ${said || response.statusText}`, parsed);
}

/** Each line of an NDJSON answer, parsed, as it arrives. */
export async function* ndjsonLines<T>(response: Response): AsyncGenerator<T> {
  if (!response.body) return;
  const decoder = new TextDecoder();
  let partial = '';
  for await (const bytes of response.body as unknown as AsyncIterable<Uint8Array>) {
    const lines = (partial + decoder.decode(bytes, { stream: true })).split('\n');
    partial = lines.pop()!;
    for (const line of lines) if (line.trim()) yield JSON.parse(line) as T;
  }
  if (partial.trim()) yield JSON.parse(partial) as T;
}

function isBytes(body: RequestBody): body is Uint8Array | ReadableStream<Uint8Array> {
  return body instanceof Uint8Array || body instanceof ReadableStream;
}

/**
 * The SDK's one HTTP transport to the gateway (the CLI's too): bearer token, JSON or bytes in,
 * typed errors carrying the gateway's own message out.
 */
export class TernHttp {
  constructor(readonly connection: TernConnection) {}

  /** One call; a gateway that cannot be reached is a TernConnectionError that says so. */
  async send(method: string, path: string, body?: RequestBody, options: SendOptions = {}): Promise<Response> {
    const { gateway, token } = this.connection;
    const raw = isBytes(body);
    try {
      return await fetch(`${gateway}${path}`, {
        method,
        headers: {
          ...(token ? { authorization: `Bearer ${token}` } : {}),
          ...(body !== undefined ? { 'content-type': raw ? (options.contentType ?? 'application/octet-stream') : 'application/json' } : {}),
          ...options.headers,
        },
        body: body === undefined ? undefined : raw ? body : JSON.stringify(body),
        ...(body instanceof ReadableStream ? { duplex: 'half' } : {}),
        ...(options.timeoutMs ? { signal: AbortSignal.timeout(options.timeoutMs) } : {}),
      } as RequestInit);
    } catch (e) {
      const cause = (e as Error).cause as Error | undefined;
      throw new TernConnectionError(
        0,
        `cannot reach the gateway at ${gateway} (${cause?.message ?? String(cause ?? (e as Error).message)}); is it running? (npm run up)`,
      );
    }
  }

  /** A JSON request; a status outside 2xx (and `okStatuses`) throws the gateway's message. */
  async request<T>(method: string, path: string, body?: RequestBody, okStatuses: number[] = []): Promise<{ status: number; body: T }> {
    const response = await this.send(method, path, body, { timeoutMs: REQUEST_TIMEOUT_MS });
    const text = await response.text();
    if (!response.ok && !okStatuses.includes(response.status)) throw failure(response, text);
    return { status: response.status, body: parseJson(text) as T };
  }

  get<T>(path: string, okStatuses?: number[]) {
    return this.request<T>('GET', path, undefined, okStatuses);
  }

  /** A request whose answer is read as it streams (bytes, NDJSON, events); an error status throws with the gateway's message. */
  async stream(method: string, path: string, body?: RequestBody, options?: SendOptions): Promise<Response> {
    const response = await this.send(method, path, body, options);
    if (!response.ok) throw failure(response, await response.text());
    return response;
  }

  /**
   * Streams `source` (`size` bytes) as the body of one request, read only as fast as the socket
   * drains. Sent with node:http, not fetch: fetch reads a streamed body ahead of the socket (a
   * 2 GB file took 1 GB of memory). An error status throws with the gateway's message.
   */
  async upload(method: string, path: string, source: Readable, size: number, options: SendOptions = {}): Promise<Response> {
    const { gateway, token } = this.connection;
    const url = new URL(`${gateway}${path}`);
    const response = await new Promise<Response>((resolve, reject) => {
      const req = (url.protocol === 'https:' ? httpsRequest : httpRequest)(url, {
        method,
        headers: {
          ...(token ? { authorization: `Bearer ${token}` } : {}),
          'content-type': options.contentType ?? 'application/octet-stream',
          'content-length': String(size),
          ...options.headers,
        },
      });
      req.on('response', (res) => {
        const parts: Buffer[] = [];
        res.on('data', (d: Buffer) => parts.push(d));
        res.on('end', () => resolve(new Response(Buffer.concat(parts), { status: res.statusCode })));
        res.on('error', reject);
      });
      req.on('error', (e) =>
        reject(new TernConnectionError(0, `cannot reach the gateway at ${gateway} (${e.message}); is it running? (npm run up)`)),
      );
      // A refusal mid-upload (413) ends the request early: the answer above says why, not this pipeline.
      pipeline(source, req).catch(() => undefined);
    });
    if (!response.ok) throw failure(response, await response.text());
    return response;
  }
}
