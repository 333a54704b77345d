import { createHash } from 'node:crypto';

/**
 * Whether a task is one of the `sample` share its deployment spot-checks: drawn from the task's
 * id (a random UUID the gateway chose), so every gateway replica and every redelivery of its
 * completion draws the same, and nothing the machine running it says can change the draw.
 */
export function sampledForSpotCheck(taskId: string, sample: number): boolean {
  if (sample >= 1) return true;
  if (!(sample > 0)) return false;
  const draw = createHash('sha256').update(taskId).digest().readUInt32BE(0) / 2 ** 32;
  return draw < sample;
}

/** A machine that could run a spot check: a ready container of the task's version on it. */
export interface VerifierCandidate {
  readonly machineId: string;
  readonly containerId: string;
  readonly verified: boolean;
  /** Its reputation score now; undefined when none is known. */
  readonly score: number | undefined;
}

export type VerifierChoice =
  { readonly chosen: true; readonly machineId: string; readonly containerId: string } | { readonly chosen: false; readonly reason: string };

/**
 * The verifier of a result from `checked` (score `checkedScore`): a verified machine other than
 * it whose reputation is strictly higher, the highest such (ties: the first listed). A tie is no
 * verifier: when two machines of equal standing disagree, nothing says which one lied, so no
 * check is made.
 */
export function chooseVerifier(
  checked: string,
  checkedScore: number | undefined,
  candidates: readonly VerifierCandidate[],
): VerifierChoice {
  const others = candidates.filter((c) => c.machineId !== checked);
  if (!others.length) return { chosen: false, reason: 'no other machine runs a ready container of this version' };
  const verified = others.filter((c) => c.verified);
  if (!verified.length) return { chosen: false, reason: 'no other machine running this version is verified' };
  const floor = checkedScore ?? 0;
  const higher = verified.filter((c) => c.score !== undefined && c.score > floor);
  if (!higher.length)
    return {
      chosen: false,
      reason: `no verified machine running this version has a reputation above ${floor.toFixed(4)} (the checked machine's)`,
    };
  const best = higher.reduce((a, b) => (b.score! > a.score! ? b : a));
  return { chosen: true, machineId: best.machineId, containerId: best.containerId };
}

/**
 * When a pending spot check stops waiting on its verifier: the task's own timeout (the verifier
 * runs the same handler on the same input, so it needs no longer) plus `marginSeconds` for the
 * message to reach it and the answer to come back. A verifier that never answers (gone offline,
 * the core NATS ask lost) must not leave the check pending forever.
 */
export function spotCheckDeadline(requestedAt: string, taskTimeoutSeconds: number, marginSeconds: number): Date {
  return new Date(Date.parse(requestedAt) + (taskTimeoutSeconds + marginSeconds) * 1000);
}

/** Whether a check still `pending` at `now` is past its deadline and is to be expired. */
export function spotCheckOverdue(
  check: { readonly state: string; readonly requestedAt: string },
  taskTimeoutSeconds: number,
  marginSeconds: number,
  now: Date,
): boolean {
  if (check.state !== 'pending') return false;
  const deadline = spotCheckDeadline(check.requestedAt, taskTimeoutSeconds, marginSeconds).getTime();
  // An unreadable requestedAt (never written by the gateway) would wait forever: expire it.
  return Number.isNaN(deadline) || now.getTime() > deadline;
}
