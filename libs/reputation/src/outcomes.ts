import { addAt, type Decayed, valueAt } from './decay.js';
import { type ReputationParams, smoothedRate } from './params.js';

/**
 * How a task attempt or a container start ended, as far as the machine is concerned:
 * - `success`;
 * - `shared`: a failure that may be the user's fault (the handler raised, the image would not
 *   start, the health check failed). It counts against the machine only in excess of the same
 *   deployment's failure rate on other machines;
 * - `machine`: a failure the machine owns (the task timed out or its container was lost, the
 *   machine died under a starting container). It counts in full.
 */
export type Outcome = 'success' | 'shared' | 'machine';

/**
 * A failed task attempt: a handler error (`error`) may be the user's, so it is shared; a
 * timeout or a lost container (`timeout`, `container-lost`) is the machine's.
 */
export function taskFailureOutcome(cause: string): Outcome {
  return cause === 'error' ? 'shared' : 'machine';
}

/**
 * A container that failed before it was ready: the image, the runtime or the health check may
 * fail because of what the user shipped (shared); a machine lost under it is the machine's.
 */
export function startFailureOutcome(phase: string): Outcome {
  return phase === 'machine-lost' ? 'machine' : 'shared';
}

/** One machine's outcomes for one deployment, decayed. */
export interface OutcomeTally {
  readonly attempts: Decayed;
  readonly shared: Decayed;
  readonly machine: Decayed;
}

/** Tallies keyed by deployment id. */
export type OutcomeBook = Record<string, OutcomeTally>;

export function recordOutcome(book: OutcomeBook, deploymentId: string, outcome: Outcome, at: number, params: ReputationParams): void {
  const t = book[deploymentId];
  book[deploymentId] = {
    attempts: addAt(t?.attempts, 1, at, params.halfLifeMs),
    shared: outcome === 'shared' ? addAt(t?.shared, 1, at, params.halfLifeMs) : (t?.shared ?? { v: 0, at }),
    machine: outcome === 'machine' ? addAt(t?.machine, 1, at, params.halfLifeMs) : (t?.machine ?? { v: 0, at }),
  };
}

/** Drops deployments whose attempts have faded below `floor` (they no longer move any rate). */
export function pruneOutcomes(book: OutcomeBook, now: number, params: ReputationParams, floor = 0.01): void {
  for (const [id, t] of Object.entries(book)) if (valueAt(t.attempts, now, params.halfLifeMs) < floor) delete book[id];
}

interface Counts {
  attempts: number;
  shared: number;
  machine: number;
}

function countsAt(t: OutcomeTally, now: number, params: ReputationParams): Counts {
  return {
    attempts: valueAt(t.attempts, now, params.halfLifeMs),
    shared: valueAt(t.shared, now, params.halfLifeMs),
    machine: valueAt(t.machine, now, params.halfLifeMs),
  };
}

export interface OutcomeRate {
  /** Beta-smoothed share of attempts that were not the machine's fault, 0..1. */
  readonly rate: number;
  /** Decayed attempts and the failures charged to the machine, for explaining the rate. */
  readonly attempts: number;
  readonly faults: number;
}

/** Every machine's decayed attempts and shared failures per deployment, summed: what one machine's rate is judged against. */
export type OutcomeTotals = ReadonlyMap<string, { readonly attempts: number; readonly shared: number }>;

/** The totals over `books` (every machine's) at `now`. */
export function outcomeTotals(books: Iterable<OutcomeBook>, now: number, params: ReputationParams): OutcomeTotals {
  const totals = new Map<string, { attempts: number; shared: number }>();
  for (const book of books) {
    for (const [deploymentId, tally] of Object.entries(book)) {
      const c = countsAt(tally, now, params);
      const t = totals.get(deploymentId) ?? { attempts: 0, shared: 0 };
      totals.set(deploymentId, { attempts: t.attempts + c.attempts, shared: t.shared + c.shared });
    }
  }
  return totals;
}

/**
 * The success rate of one machine, judged against its peers (`totals` over every machine, this
 * one included).
 *
 * For machine m and deployment d, with decayed counts n (attempts), s (shared failures) and
 * k (machine failures), and N', S' the same deployment's attempts and shared failures on every
 * other machine:
 *
 *   baseline p = (S' + c · s/n) / (N' + c)        (c = baselineStrength)
 *   excess     = max(0, s − n · p)
 *   faults(m)  = Σ_d (excess + k)
 *   rate(m)    = (Σ_d n − faults + α) / (Σ_d n + α + β)
 *
 * A handler that fails on every machine alike raises p to its own rate and charges no one; one
 * that fails only on m leaves p near the others' rate, so m's failures beyond it count. With
 * little evidence elsewhere (N' small) p leans to m's own rate: the benefit of the doubt.
 */
export function outcomeRate(book: OutcomeBook, totals: OutcomeTotals, now: number, params: ReputationParams): OutcomeRate {
  let attempts = 0;
  let faults = 0;
  for (const [deploymentId, tally] of Object.entries(book)) {
    const c = countsAt(tally, now, params);
    // A book outside the totals has no peers.
    const all = totals.get(deploymentId) ?? c;
    const otherAttempts = Math.max(0, all.attempts - c.attempts);
    const otherShared = Math.max(0, all.shared - c.shared);
    const own = c.attempts > 0 ? c.shared / c.attempts : 0;
    const baseline = (otherShared + params.baselineStrength * own) / (otherAttempts + params.baselineStrength);
    const excess = Math.max(0, c.shared - c.attempts * baseline);
    attempts += c.attempts;
    faults += Math.min(c.attempts, excess + c.machine);
  }
  return { rate: smoothedRate(attempts - faults, attempts, params), attempts, faults };
}

/** The success rate of every machine in `books`, judged against the others (see outcomeRate). */
export function outcomeRates(books: ReadonlyMap<string, OutcomeBook>, now: number, params: ReputationParams): Map<string, OutcomeRate> {
  const totals = outcomeTotals(books.values(), now, params);
  return new Map([...books].map(([machineId, book]) => [machineId, outcomeRate(book, totals, now, params)]));
}
