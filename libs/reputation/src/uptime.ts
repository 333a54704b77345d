import { DAY_MS } from './params.js';

/** A machine's availability from a moment on: online in every state but `offline`. */
export interface Transition {
  readonly at: number;
  readonly online: boolean;
}

export const UPTIME_PERIODS_MS = [DAY_MS, 7 * DAY_MS, 30 * DAY_MS] as const;
const LONGEST = UPTIME_PERIODS_MS[UPTIME_PERIODS_MS.length - 1];

/**
 * Adds a transition in time order (a late event is slotted in), dropping repeats of the same
 * availability and everything older than the longest period except the one in force at its start.
 */
export function recordTransition(transitions: Transition[], next: Transition, now: number): void {
  let i = transitions.length;
  while (i > 0 && transitions[i - 1].at > next.at) i--;
  if (transitions[i - 1]?.at === next.at && transitions[i - 1].online === next.online) return;
  transitions.splice(i, 0, next);
  for (let j = transitions.length - 1; j > 0; j--) if (transitions[j].online === transitions[j - 1].online) transitions.splice(j, 1);
  const cutoff = now - LONGEST;
  let firstInWindow = transitions.findIndex((t) => t.at >= cutoff);
  if (firstInWindow === -1) firstInWindow = transitions.length;
  if (firstInWindow > 1) transitions.splice(0, firstInWindow - 1);
}

/**
 * 1 − offline time / period over the last `periodMs`. Time before the machine's first known
 * state is not counted either way: a machine that joined an hour ago and stayed up has 100 %
 * over 30 days too. With no transitions the machine has no record: 1.
 */
export function uptime(transitions: readonly Transition[], now: number, periodMs: number): number {
  if (!transitions.length) return 1;
  const start = Math.max(now - periodMs, transitions[0].at);
  const span = now - start;
  if (span <= 0) return transitions[transitions.length - 1].online ? 1 : 0;
  let offline = 0;
  for (let i = 0; i < transitions.length; i++) {
    if (transitions[i].online) continue;
    const from = Math.max(transitions[i].at, start);
    const to = Math.min(transitions[i + 1]?.at ?? now, now);
    if (to > from) offline += to - from;
  }
  return Math.min(1, Math.max(0, 1 - offline / span));
}
