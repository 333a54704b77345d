/**
 * Usage slices: a container's [start, end) span cut at UTC hour boundaries. Times are epoch
 * milliseconds throughout, so the arithmetic is exact integers and a slice's id does not
 * depend on how a Date was printed.
 */
export const HOUR_MS = 3_600_000;

export interface UsageSlice {
  /** Inclusive, epoch ms. */
  readonly periodStart: number;
  /** Exclusive, epoch ms; within the same UTC hour as periodStart (or its end). */
  readonly periodEnd: number;
  readonly seconds: number;
}

/** The start of the UTC hour holding `ms`. */
export function hourFloor(ms: number): number {
  return Math.floor(ms / HOUR_MS) * HOUR_MS;
}

/**
 * [start, end) cut at every hour boundary it crosses. An empty or inverted span yields no
 * slices: a clock that runs backwards between two events must not produce negative usage.
 */
export function splitAtHours(start: number, end: number): UsageSlice[] {
  assertTime(start, 'start');
  assertTime(end, 'end');
  const slices: UsageSlice[] = [];
  for (let from = start; from < end;) {
    const to = Math.min(end, hourFloor(from) + HOUR_MS);
    slices.push({ periodStart: from, periodEnd: to, seconds: (to - from) / 1000 });
    from = to;
  }
  return slices;
}

/**
 * The id of the slice of `containerId` that lies in the hour holding `periodStart`. Keyed on
 * the hour, not on the slice's exact start, so a slice grown by a checkpoint and the same
 * slice written at the container's stop are one record.
 */
export function intervalId(containerId: string, periodStart: number): string {
  return `${containerId}:${new Date(hourFloor(periodStart)).toISOString()}`;
}

function assertTime(ms: number, name: string): void {
  if (!Number.isFinite(ms)) throw new RangeError(`${name} must be a finite time, got ${ms}`);
}
