import { type MachineRegisterRequest, MachineRegisterResponse } from '#tern/contracts';
import { validatePayload } from '#tern/messaging';
import { backoffMs, type BackoffShape } from '#tern/timing';

export const REGISTER_PATH = '/api/v1/machine/register';

/**
 * What one registration call came to. `refused` will not heal by retrying (a spent or
 * revoked token, a request the gateway rejects): the agent stops and says why. `retry`
 * covers an unreachable or failing gateway.
 */
export type RegisterOutcome =
  | { kind: 'registered'; response: MachineRegisterResponse }
  | { kind: 'refused'; status: number; message: string }
  | { kind: 'retry'; status?: number; message: string };

/** Statuses that mean "this request, with this token, will never succeed". */
const REFUSED = new Set([400, 401, 403, 409, 422]);

function gatewayMessage(body: unknown, fallback: string): string {
  const message = (body as { message?: unknown } | undefined)?.message;
  if (Array.isArray(message)) return message.join('; ');
  if (typeof message === 'string' && message) return message;
  return fallback;
}

export interface RegisterCall {
  gatewayUrl: string;
  token: string;
  request: MachineRegisterRequest;
  timeoutMs?: number;
  fetch?: typeof fetch;
}

export async function registerOnce(call: RegisterCall): Promise<RegisterOutcome> {
  const url = `${call.gatewayUrl}${REGISTER_PATH}`;
  let response: Response;
  try {
    response = await (call.fetch ?? fetch)(url, {
      method: 'POST',
      headers: { authorization: `Bearer ${call.token}`, 'content-type': 'application/json' },
      body: JSON.stringify(call.request),
      signal: AbortSignal.timeout(call.timeoutMs ?? 15_000),
    });
  } catch (e) {
    const err = e as Error & { cause?: { code?: string; message?: string } };
    return { kind: 'retry', message: `cannot reach ${url}: ${err.cause?.code ?? err.cause?.message ?? err.message}` };
  }
  const text = await response.text().catch(() => '');
  let body: unknown;
  try {
    body = text ? JSON.parse(text) : undefined;
  } catch {
    body = undefined;
  }
  if (response.ok) {
    const decoded = await validatePayload(MachineRegisterResponse, body);
    if (!decoded.ok)
      return { kind: 'retry', status: response.status, message: `the gateway's answer is not a registration (${decoded.reason})` };
    return { kind: 'registered', response: decoded.value };
  }
  const message = gatewayMessage(body, response.statusText || text.slice(0, 200));
  if (REFUSED.has(response.status)) return { kind: 'refused', status: response.status, message };
  return { kind: 'retry', status: response.status, message: `${response.status} ${message}` };
}

/** Back-off between attempts: 1 s, 2 s, 4 s … capped at a minute, each ±20 % so a fleet does not retry in step. */
export const REGISTER_BACKOFF: BackoffShape = { firstMs: 1000, maxMs: 60_000, jitter: 0.2 };

export interface RetryHooks {
  /** Before each attempt (1-based). */
  onAttempt?(attempt: number): void;
  /** After a failed attempt that will be retried in delayMs. */
  onRetry?(attempt: number, outcome: Extract<RegisterOutcome, { kind: 'retry' }>, delayMs: number): void;
  sleep?(ms: number): Promise<void>;
  /** Stop retrying (shutdown); resolves with the last outcome. */
  signal?: AbortSignal;
  maxDelayMs?: number;
}

/** Registers, retrying forever while the gateway is unreachable or failing; stops at success or refusal. */
export async function registerWithRetry(call: RegisterCall, hooks: RetryHooks = {}): Promise<RegisterOutcome> {
  const sleep = hooks.sleep ?? ((ms: number) => new Promise<void>((r) => setTimeout(r, ms)));
  for (let attempt = 1; ; attempt++) {
    hooks.onAttempt?.(attempt);
    const outcome = await registerOnce(call);
    if (outcome.kind !== 'retry' || hooks.signal?.aborted) return outcome;
    const delay = backoffMs(attempt, { ...REGISTER_BACKOFF, maxMs: hooks.maxDelayMs ?? REGISTER_BACKOFF.maxMs });
    hooks.onRetry?.(attempt, outcome, delay);
    await sleep(delay);
    if (hooks.signal?.aborted) return outcome;
  }
}
