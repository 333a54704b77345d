import type { CrashLoopView } from '#tern/contracts';
import type { LastCrash } from '#tern/persistence';
import { type BackoffShape, backoffMs } from '#tern/timing';
import { isCrashLooping } from '#tern/placement';

/** A version's crash loop as `tern deployments <name>` shows it; null when it is not in one. */
export function crashLoopView(
  v: { crashCount: number; lastCrashAt: Date | null; lastCrash: Record<string, unknown> | null },
  shape: BackoffShape,
  now = Date.now(),
): CrashLoopView | null {
  const state = { crashes: v.crashCount, lastCrashAt: v.lastCrashAt };
  if (!isCrashLooping(state, now, shape) || !v.lastCrash) return null;
  const last = v.lastCrash as unknown as LastCrash;
  return {
    state: 'CrashLoopBackOff',
    crashes: v.crashCount,
    lastCrashAt: v.lastCrashAt!.toISOString(),
    nextStartAt: new Date(v.lastCrashAt!.getTime() + backoffMs(v.crashCount, shape)).toISOString(),
    phase: last.phase,
    error: last.error,
    exitCode: last.exitCode,
    lastLines: last.lastLines,
  };
}
