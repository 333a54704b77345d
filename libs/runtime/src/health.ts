import { request } from 'node:http';
import { connect } from 'node:net';
import { type BackoffShape, backoffMs, sleep } from '#tern/timing';

export interface WaitForHealthOptions {
  port: number;
  host?: string;
  /** The readiness check: an HTTP GET of this path (default /health), or `tcp`: a connection accepted. */
  check?: string;
  timeoutMs?: number;
  /** Between probes: 50 ms growing ×1.5 up to 1 s unless given (a slow server is not probed 100 times a second). */
  interval?: BackoffShape;
  signal?: AbortSignal;
  /** Stop early when this resolves true (e.g. the container exited). */
  gaveUp?: () => Promise<boolean>;
  /** Told each failed probe's outcome (`answered 404`), so a container that exits first can say why it was not ready. */
  onMiss?: (why: string) => void;
}

/** Between readiness probes: quick at first (a runner is up in a few hundred ms), then once a second. */
export const PROBE_INTERVAL: BackoffShape = { firstMs: 50, maxMs: 1000, factor: 1.5 };

/** One probe's outcome: ok, or what went wrong, in words for the reason a start failed. */
type ProbeResult = { ok: true } | { ok: false; why: string };

function probeHttp(host: string, port: number, path: string, timeoutMs: number): Promise<ProbeResult> {
  return new Promise((resolve) => {
    const req = request({ host, port, path, method: 'GET', timeout: timeoutMs, agent: false }, (res) => {
      const status = res.statusCode ?? 0;
      const result: ProbeResult = status >= 200 && status < 300 ? { ok: true } : { ok: false, why: `answered ${status}` };
      res.resume();
      res.on('end', () => resolve(result));
      res.on('error', (e) => resolve({ ok: false, why: e.message }));
    });
    req.on('timeout', () => req.destroy(new Error(`no answer within ${timeoutMs} ms`)));
    req.on('error', (e: NodeJS.ErrnoException) =>
      resolve({ ok: false, why: e.code === 'ECONNREFUSED' ? 'connection refused' : e.message }),
    );
    req.end();
  });
}

function probeTcp(host: string, port: number, timeoutMs: number): Promise<ProbeResult> {
  return new Promise((resolve) => {
    const socket = connect({ host, port, timeout: timeoutMs });
    socket.once('connect', () => {
      socket.destroy();
      resolve({ ok: true });
    });
    socket.once('timeout', () => socket.destroy(new Error(`no connection within ${timeoutMs} ms`)));
    socket.once('error', (e: NodeJS.ErrnoException) =>
      resolve({ ok: false, why: e.code === 'ECONNREFUSED' ? 'connection refused' : e.message }),
    );
  });
}

/** The check in words: `GET /health` or `a TCP connection`. */
export function describeCheck(check = '/health'): string {
  return check === 'tcp' ? 'TCP connection' : `GET ${check}`;
}

/**
 * Polls the container's readiness check (the container contract: `GET /health` answers 2xx, or
 * another path, or `tcp`: the port accepts a connection) until it passes. Resolves with the
 * milliseconds it took; rejects on timeout or when gaveUp() says so, naming the last probe's
 * outcome (`connection refused`, `answered 404`).
 */
export async function waitForHealth(options: WaitForHealthOptions): Promise<number> {
  const { port, host = '127.0.0.1', check = '/health', timeoutMs = 30_000, interval = PROBE_INTERVAL } = options;
  const started = performance.now();
  const probe = () =>
    check === 'tcp' ? probeTcp(host, port, Math.min(1000, timeoutMs)) : probeHttp(host, port, check, Math.min(1000, timeoutMs));
  for (let i = 1; ; i++) {
    const result = await probe();
    if (result.ok) return performance.now() - started;
    options.onMiss?.(result.why);
    const what = `${describeCheck(check)} on ${host}:${port}`;
    if (performance.now() - started > timeoutMs) throw new Error(`${what} did not pass within ${timeoutMs} ms (last: ${result.why})`);
    if (options.gaveUp && (await options.gaveUp())) throw new Error(`gave up waiting for ${what} (last: ${result.why})`);
    await sleep(backoffMs(i, interval), options.signal);
    if (options.signal?.aborted) throw new Error(`stopped waiting for ${what}`);
  }
}
