import { type CliContext } from './cli-config.js';

export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly body?: unknown,
  ) {
    super(message);
  }
}

/** An answer's JSON, or its text when it is not JSON. */
function parseJson(text: string): unknown {
  try {
    return text ? JSON.parse(text) : undefined;
  } catch {
    return text;
  }
}

/** The gateway's message from an error answer's text (JSON `message`, a string or a list). */
function failure(response: Response, text: string): ApiError {
  const parsed = parseJson(text);
  const message = (parsed as { message?: unknown })?.message;
  return new ApiError(
    response.status,
    `${response.status} ${Array.isArray(message) ? message.join('; ') : (message ?? response.statusText)}`,
    parsed,
  );
}

/** A thin JSON client for the gateway; errors carry the gateway's own message. */
export class ApiClient {
  constructor(private readonly ctx: CliContext) {}

  /** One call: a JSON body, or raw bytes sent as they are. */
  private async send(method: string, path: string, body: unknown, timeoutMs?: number): Promise<Response> {
    const raw = body instanceof Uint8Array;
    try {
      return await fetch(`${this.ctx.gateway}${path}`, {
        method,
        headers: {
          ...(this.ctx.token ? { authorization: `Bearer ${this.ctx.token}` } : {}),
          ...(body !== undefined ? { 'content-type': raw ? 'application/octet-stream' : 'application/json' } : {}),
        },
        body: body === undefined ? undefined : raw ? body : JSON.stringify(body),
        ...(timeoutMs ? { signal: AbortSignal.timeout(timeoutMs) } : {}),
      });
    } catch (e) {
      throw new ApiError(
        0,
        `cannot reach the gateway at ${this.ctx.gateway} (${(e as Error).cause ?? (e as Error).message}); is it running? (npm run up)`,
      );
    }
  }

  async request<T>(method: string, path: string, body?: unknown, okStatuses: number[] = []): Promise<{ status: number; body: T }> {
    const response = await this.send(method, path, body, 30_000);
    const text = await response.text();
    if (!response.ok && !okStatuses.includes(response.status)) throw failure(response, text);
    return { status: response.status, body: parseJson(text) as T };
  }

  get<T>(path: string, okStatuses?: number[]) {
    return this.request<T>('GET', path, undefined, okStatuses);
  }

  /**
   * A request whose answer is read as it streams (a file's bytes, an exec's NDJSON), with raw
   * bytes or JSON in; an error status throws with the gateway's message.
   */
  async stream(method: string, path: string, body?: Uint8Array | object): Promise<Response> {
    const response = await this.send(method, path, body);
    if (!response.ok) throw failure(response, await response.text());
    return response;
  }
}
