import { Counter } from 'prom-client';
import { InvokeError } from '#tern/messaging';

/** Why Tern ended an endpoint request before its container did: the limit's name in logs and metrics. */
export type EndReason = 'client_closed' | 'timeout' | 'idle_timeout' | 'max_duration';

const endedEarly = new Counter({
  name: 'tern_endpoint_requests_ended_early_total',
  help: 'Endpoint requests Tern ended before their container did, by reason: client_closed (the client hung up), timeout (no response started in time), idle_timeout (a started response went silent), max_duration (the total limit)',
  labelNames: ['deployment', 'reason'],
});

/** The InvokeError a request ends with when Tern ends it: its reason says which limit (or the client). */
export class EndedEarly extends InvokeError {
  constructor(
    readonly reason: EndReason,
    code: number,
    message: string,
  ) {
    super(code, message);
  }
}

/**
 * The three limits of one endpoint request, as timers that abort its invoke (which cancels it on
 * the agent, and so the container's request): `timeout` until the response starts, `idle_timeout`
 * between two pieces of a started response, `max_duration` in all; and the client hanging up.
 * The first to fire is the reason the request ends, counted once.
 */
export class RequestLimits {
  private readonly abort = new AbortController();
  private readonly timers: NodeJS.Timeout[] = [];
  private idle?: NodeJS.Timeout;
  private firstByte?: NodeJS.Timeout;

  constructor(
    private readonly deployment: string,
    private readonly idleMs: number,
  ) {}

  get signal(): AbortSignal {
    return this.abort.signal;
  }

  /** Why the request was ended, once it was. */
  get ended(): EndedEarly | undefined {
    const reason: unknown = this.abort.signal.reason;
    return reason instanceof EndedEarly ? reason : undefined;
  }

  end(reason: EndReason, code: number, message: string): void {
    if (this.abort.signal.aborted) return;
    this.clear();
    endedEarly.inc({ deployment: this.deployment, reason });
    this.abort.abort(new EndedEarly(reason, code, message));
  }

  /** `timeout`: ends the request at `at` (epoch ms) unless its response has started by then. */
  untilStart(at: number, message: string): void {
    this.firstByte = this.endAt(at, 'timeout', message);
  }

  /** `max_duration`: ends the request at `at` (epoch ms) unless it is over by then. */
  inAll(at: number, message: string): void {
    this.endAt(at, 'max_duration', message);
  }

  /** The response started: `timeout` no longer applies; idle_timeout does from now. */
  started(): void {
    if (this.firstByte) clearTimeout(this.firstByte);
  }

  private endAt(at: number, reason: EndReason, message: string): NodeJS.Timeout {
    const timer = setTimeout(() => this.end(reason, 504, message), Math.max(0, at - Date.now()));
    timer.unref();
    this.timers.push(timer);
    return timer;
  }

  /** Waiting for the next piece of a started response: ends it after idle_timeout of silence. */
  waiting(): void {
    if (this.abort.signal.aborted) return;
    this.idle = setTimeout(
      () => this.end('idle_timeout', 504, `the response sent nothing for ${this.idleMs / 1000} s (the deployment's idle_timeout)`),
      this.idleMs,
    );
    this.idle.unref();
  }

  /** A piece arrived (or the response ended). */
  heard(): void {
    if (this.idle) clearTimeout(this.idle);
    this.idle = undefined;
  }

  /** The request is over: no limit fires any more. */
  clear(): void {
    for (const t of this.timers.splice(0)) clearTimeout(t);
    this.heard();
  }
}
