import type { BackoffShape } from '#tern/timing';

/** Waits between placement attempts for a version that found no room: 1 s, doubling, at most 30 s. */
export const PLACEMENT_BACKOFF: BackoffShape = { firstMs: 1000, maxMs: 30_000 };
