/** How a back-off grows: firstMs after the first failure, doubling (or × factor), capped at maxMs. */
export interface BackoffShape {
  firstMs: number;
  maxMs: number;
  /** Growth per failure; default 2. */
  factor?: number;
  /** Spread each wait by ±jitter (0.2 → ±20 %) so a fleet does not retry in step. */
  jitter?: number;
}

/** 1 s, 2 s, 4 s … at most 60 s, no jitter. */
export const DEFAULT_BACKOFF: BackoffShape = { firstMs: 1000, maxMs: 60_000 };

/**
 * The one back-off of the codebase: the wait after `failures` failures in a row (1 → firstMs,
 * 0 → no wait). `random` is there for tests of the jitter.
 */
export function backoffMs(failures: number, shape: BackoffShape = DEFAULT_BACKOFF, random: () => number = Math.random): number {
  if (failures <= 0) return 0;
  const base = Math.min(shape.maxMs, Math.round(shape.firstMs * (shape.factor ?? 2) ** Math.min(failures - 1, 30)));
  const jitter = shape.jitter ?? 0;
  return jitter ? Math.round(base * (1 - jitter + 2 * jitter * random())) : base;
}

/** Resolves after ms, or at once when the signal is aborted. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
  });
}
