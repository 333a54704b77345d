/** Waits between placement attempts for a version that found no room: 1 s, doubling, at most 30 s. */
export const BACKOFF_FIRST_MS = 1000;
export const BACKOFF_MAX_MS = 30_000;

/** The wait after the given number of attempts in a row that found no room (1 → 1 s). */
export function backoffMs(failures: number): number {
  if (failures <= 0) return 0;
  return Math.min(BACKOFF_MAX_MS, BACKOFF_FIRST_MS * 2 ** Math.min(failures - 1, 30));
}
