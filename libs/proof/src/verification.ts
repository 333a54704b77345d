import type { VerificationState } from '#tern/contracts';

/**
 * A machine's standing with the control plane about its hardware: `unverified` until it proves
 * its claims (and again when its inventory changes or it stops answering challenges),
 * `verified` after a challenge of every claimed device passed, `quarantined` after one failed
 * (a wrong answer, a commitment too late for the claimed device). Only the latest challenge
 * counts: a quarantined machine challenged again and passing is verified again.
 */
export type ChallengeOutcome =
  /** Every claimed device committed in time and answered the probe correctly. */
  | { readonly kind: 'passed'; readonly summary: string }
  /** A device's answer was wrong, or its commitment too late: the reason names which and why. */
  | { readonly kind: 'failed'; readonly reason: string }
  /** Nothing on the machine answers challenges (an agent without a prover, or none at all). */
  | { readonly kind: 'unanswered'; readonly reason: string }
  /**
   * The machine answers, but has no prover for a claimed device (an agent declines a GPU its
   * discovery did not see, one not NVIDIA's, or any GPU without a runtime): the claim stays unproven, the machine unverified, not quarantined, and it is asked
   * again at the usual interval. An honest GPU machine may then run what asks for no verified
   * machine; a machine that does answer a GPU challenge is held to the GPU's band.
   */
  | { readonly kind: 'unproven'; readonly reason: string };

export interface Verification {
  readonly state: VerificationState;
  readonly reason: string;
}

export function verificationAfter(outcome: ChallengeOutcome): Verification {
  switch (outcome.kind) {
    case 'passed':
      return { state: 'verified', reason: outcome.summary };
    case 'failed':
      return { state: 'quarantined', reason: outcome.reason };
    case 'unanswered':
    case 'unproven':
      return { state: 'unverified', reason: outcome.reason };
  }
}

/** After an inventory change: what was proven was another machine's claim. */
export const INVENTORY_CHANGED: Verification = { state: 'unverified', reason: 'inventory changed: to be challenged again' };

/**
 * When to challenge a machine next: `intervalMs` later, give or take `jitter` of it (0.2: ±20 %),
 * so a machine cannot tell when the next challenge comes, and a fleet's challenges spread out.
 */
export function nextChallengeDelayMs(intervalMs: number, jitter: number, random: () => number = Math.random): number {
  return Math.round(intervalMs * (1 + jitter * (2 * random() - 1)));
}
