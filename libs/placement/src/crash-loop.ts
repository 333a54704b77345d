import { type BackoffShape, backoffMs } from '#tern/timing';

/** Waits between starts of a version whose containers crash: 1 s, doubling, at most 5 min (CONTAINER_CRASH_BACKOFF_*). */
export const CRASH_BACKOFF: BackoffShape = { firstMs: 1000, maxMs: 300_000 };

/** What the scheduler knows of a version's crashes (CrashLoopsRepository). */
export interface CrashState {
  /** Containers of the version that crashed in a row. */
  crashes: number;
  lastCrashAt: Date | null;
}

/**
 * How long a version must go without a crash (or a container run ready) before its count starts
 * over: twice the longest wait, and never under 10 minutes (Kubernetes' reset of a crash loop).
 */
export function crashResetMs(shape: BackoffShape): number {
  return Math.max(2 * shape.maxMs, 600_000);
}

/** Whether the version is in a crash loop now: it crashed, and not longer ago than the reset. */
export function isCrashLooping(s: CrashState, now: number, shape: BackoffShape): boolean {
  return s.crashes > 0 && s.lastCrashAt !== null && now - s.lastCrashAt.getTime() < crashResetMs(shape);
}

/** Milliseconds before the next container of the version may start; 0: now. */
export function crashWaitMs(s: CrashState, now: number, shape: BackoffShape): number {
  if (!isCrashLooping(s, now, shape)) return 0;
  return Math.max(0, s.lastCrashAt!.getTime() + backoffMs(s.crashes, shape) - now);
}
