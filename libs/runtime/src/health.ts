import { request } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';

export interface WaitForHealthOptions {
  port: number;
  host?: string;
  path?: string;
  timeoutMs?: number;
  intervalMs?: number;
  signal?: AbortSignal;
  /** Stop early when this resolves true (e.g. the container exited). */
  gaveUp?: () => Promise<boolean>;
}

function probe(host: string, port: number, path: string, timeoutMs: number): Promise<number | undefined> {
  return new Promise((resolve) => {
    const req = request({ host, port, path, method: 'GET', timeout: timeoutMs, agent: false }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode));
      res.on('error', () => resolve(undefined));
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve(undefined));
    req.end();
  });
}

/**
 * Polls `GET http://host:port/path` until it answers 2xx (the container contract's health
 * check). Resolves with the milliseconds it took; rejects on timeout or when gaveUp() says so.
 */
export async function waitForHealth(options: WaitForHealthOptions): Promise<number> {
  const { port, host = '127.0.0.1', path = '/health', timeoutMs = 30_000, intervalMs = 10 } = options;
  const started = performance.now();
  for (let i = 0; ; i++) {
    const status = await probe(host, port, path, Math.min(1000, timeoutMs));
    if (status !== undefined && status >= 200 && status < 300) return performance.now() - started;
    if (performance.now() - started > timeoutMs) throw new Error(`http://${host}:${port}${path} not healthy after ${timeoutMs} ms`);
    if (options.gaveUp && i % 10 === 9 && (await options.gaveUp())) throw new Error(`gave up waiting for http://${host}:${port}${path}`);
    await sleep(intervalMs, undefined, { signal: options.signal });
  }
}
