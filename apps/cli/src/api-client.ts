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

/** A thin JSON client for the gateway; errors carry the gateway's own message. */
export class ApiClient {
  constructor(private readonly ctx: CliContext) {}

  async request<T>(method: string, path: string, body?: unknown, okStatuses: number[] = []): Promise<{ status: number; body: T }> {
    let response: Response;
    try {
      response = await fetch(`${this.ctx.gateway}${path}`, {
        method,
        headers: {
          ...(this.ctx.token ? { authorization: `Bearer ${this.ctx.token}` } : {}),
          ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
        },
        body: body !== undefined ? JSON.stringify(body) : undefined,
        signal: AbortSignal.timeout(30_000),
      });
    } catch (e) {
      throw new ApiError(
        0,
        `cannot reach the gateway at ${this.ctx.gateway} (${(e as Error).cause ?? (e as Error).message}); is it running? (npm run up)`,
      );
    }
    const text = await response.text();
    let parsed: unknown = text;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      /* not JSON */
    }
    if (!response.ok && !okStatuses.includes(response.status)) {
      const message = (parsed as { message?: unknown })?.message;
      throw new ApiError(
        response.status,
        `${response.status} ${Array.isArray(message) ? message.join('; ') : (message ?? response.statusText)}`,
        parsed,
      );
    }
    return { status: response.status, body: parsed as T };
  }

  get<T>(path: string, okStatuses?: number[]) {
    return this.request<T>('GET', path, undefined, okStatuses);
  }

  /**
   * A request whose answer is read as it streams (a file's bytes, an exec's NDJSON), with raw
   * bytes or JSON in; an error status throws with the gateway's message.
   */
  async stream(method: string, path: string, body?: Uint8Array | object): Promise<Response> {
    const raw = body instanceof Uint8Array;
    let response: Response;
    try {
      response = await fetch(`${this.ctx.gateway}${path}`, {
        method,
        headers: {
          ...(this.ctx.token ? { authorization: `Bearer ${this.ctx.token}` } : {}),
          ...(body === undefined ? {} : { 'content-type': raw ? 'application/octet-stream' : 'application/json' }),
        },
        body: body === undefined ? undefined : raw ? body : JSON.stringify(body),
      });
    } catch (e) {
      throw new ApiError(0, `cannot reach the gateway at ${this.ctx.gateway} (${(e as Error).cause ?? (e as Error).message})`);
    }
    if (response.ok) return response;
    const text = await response.text();
    let message: unknown = text || response.statusText;
    try {
      message = (JSON.parse(text) as { message?: unknown }).message ?? message;
    } catch {
      /* not JSON */
    }
    throw new ApiError(response.status, `${response.status} ${Array.isArray(message) ? message.join('; ') : String(message)}`);
  }
}
