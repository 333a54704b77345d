/**
 * A count that fades: its value halves every half-life, so a failure from two weeks ago weighs
 * a sixteenth of one from today (with a 3.5-day half-life). Stored as the value at a moment;
 * read at any later moment by decaying it that far. JSON-safe, as it lives in jsonb.
 */
export interface Decayed {
  /** The value as of `at`. */
  readonly v: number;
  /** Epoch milliseconds. */
  readonly at: number;
}

export const ZERO: Decayed = { v: 0, at: 0 };

/** The value at `now`; a counter from the future (clock trouble) is read as it is. */
export function valueAt(c: Decayed | undefined, now: number, halfLifeMs: number): number {
  if (!c || c.v === 0) return 0;
  const age = now - c.at;
  return age <= 0 ? c.v : c.v * Math.pow(0.5, age / halfLifeMs);
}

/** The counter with `amount` added at `at`. Events that arrive late are decayed by their own age. */
export function addAt(c: Decayed | undefined, amount: number, at: number, halfLifeMs: number): Decayed {
  if (!c || c.v === 0) return { v: amount, at };
  if (at >= c.at) return { v: valueAt(c, at, halfLifeMs) + amount, at };
  // An older event joins a newer counter with the weight it has by the counter's time.
  return { v: c.v + amount * Math.pow(0.5, (c.at - at) / halfLifeMs), at: c.at };
}
