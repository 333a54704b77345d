import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { Injectable } from '@nestjs/common';
import { AGENT_PROOF_CHALLENGE, AGENT_PROOF_PREPARE, AGENT_PROOF_PROBE } from '#tern/contracts';
import { Messaging, RequestError } from '#tern/messaging';
import {
  askInParts,
  type DeviceClaim,
  judgeMemory,
  judgeTiming,
  newChallenge,
  newProbe,
  type ProofAnswer,
  type ProofProbe,
  type TimingVerdict,
} from '#tern/proof';
import { mapLimit } from '#tern/timing';
import { AnswerChecker, type AnswerToCheck } from './answer-checker.js';

/**
 * How long a machine has to get a prover ready, untimed against the band: a GPU prover's container,
 * PyTorch's import, a CUDA context and the claimed memory allocated and touched (tens of seconds on
 * a cold machine; minutes would be a broken one).
 */
export const PREPARE_TIMEOUT_MS = 120_000;
/** How long a machine has to answer the probe: O(n²) work once C is in hand, so timing it adds nothing. */
const PROBE_TIMEOUT_MS = 15_000;

export type RoundResult =
  | { kind: 'passed'; macsPerSecond: number }
  | { kind: 'failed'; reason: string }
  | { kind: 'unanswered'; reason: string }
  | { kind: 'unproven'; reason: string };

/** Answers checked at once per machine, each in its own thread (AnswerChecker). */
const CHECK_THREADS = 2;

/** A device whose prover is ready, waiting for its seed. */
interface Prepared {
  readonly claim: DeviceClaim;
  readonly challengeId: string;
}

/** A device that committed in time and answered its probe: what is left is the check. */
interface Answered {
  readonly claim: DeviceClaim;
  readonly toCheck: AnswerToCheck;
  readonly macsPerSecond: number;
}

/**
 * Proof-of-compute rounds (libs/proof) against claimed devices of one machine, over the machine's
 * own request subjects, all the devices of one call at once: every prover is got ready first (the
 * prepare step: a prover on the device, the claimed memory allocated; its own limit, untimed),
 * then every challenge goes out at the same moment with a seed of its own, each device's
 * commitment timed from that one start. A machine that answers k claimed GPUs' challenges in turn
 * from fewer real ones needs k times the product's time for the last and misses its window; sent
 * one after another, each would have found the one real GPU free. Each probe is drawn only once
 * its device's commitment is in, and the answers are checked in worker threads (AnswerChecker).
 */
@Injectable()
export class ProofRounds {
  constructor(
    private readonly messaging: Messaging,
    private readonly checker: AnswerChecker,
  ) {}

  /** One result per claim, in the claims' order. */
  async prove(machineId: string, claims: readonly DeviceClaim[]): Promise<RoundResult[]> {
    const prepared = await Promise.all(claims.map((claim) => this.prepare(machineId, claim)));
    // One start for every device: a prover that waits for another device's product is late.
    const started = performance.now();
    const answered = await Promise.all(prepared.map((p) => ('kind' in p ? p : this.challenge(machineId, p, started))));
    return mapLimit(answered, CHECK_THREADS, async (a) => ('kind' in a ? a : this.check(a)));
  }

  private async prepare(machineId: string, claim: DeviceClaim): Promise<Prepared | RoundResult> {
    const challengeId = randomUUID();
    let allocatedBytes: number | undefined;
    try {
      ({ allocatedBytes } = await this.messaging.request(
        AGENT_PROOF_PREPARE,
        {
          challengeId,
          device: claim.device,
          n: claim.n,
          deadlineMs: PREPARE_TIMEOUT_MS,
          ...(claim.claimedMemoryBytes ? { claimedMemoryBytes: claim.claimedMemoryBytes } : {}),
        },
        { tokens: [machineId], timeoutMs: PREPARE_TIMEOUT_MS },
      ));
    } catch (e) {
      return failure(
        claim,
        e,
        () => `${claim.label}: the prover on ${claim.device} did not get ready within ${PREPARE_TIMEOUT_MS / 1000} s`,
      );
    }
    const memory = judgeMemory(claim, allocatedBytes);
    if (!memory.ok) return { kind: 'failed', reason: memory.reason };
    return { claim, challengeId };
  }

  /** The timed challenge from `started`, then the probe once the commitment is in. */
  private async challenge(machineId: string, { claim, challengeId }: Prepared, started: number): Promise<Answered | RoundResult> {
    // Drawn only now: nothing of the seed exists while the prover gets ready.
    const challenge = newChallenge(claim.n);
    let root: string;
    try {
      ({ root } = await this.messaging.request(
        AGENT_PROOF_CHALLENGE,
        { challengeId, device: claim.device, seed: challenge.seed, n: claim.n, deadlineMs: claim.deadlineMs },
        { tokens: [machineId], timeoutMs: claim.deadlineMs },
      ));
    } catch (e) {
      return failure(claim, e, () => lateReason(judgeTiming(claim, undefined)));
    }
    const timing = judgeTiming(claim, performance.now() - started);
    if (!timing.ok) return { kind: 'failed', reason: timing.reason };
    const probe = newProbe(challenge);
    const answer = await this.probe(machineId, claim, challengeId, probe);
    if ('kind' in answer) return answer;
    return { claim, toCheck: { challenge, commitment: { root }, probe, answer }, macsPerSecond: timing.macsPerSecond };
  }

  /** The probe, asked in parts whose answers each fit one NATS message (askInParts: one part up to n = 4096, two at 8192). */
  private async probe(machineId: string, claim: DeviceClaim, challengeId: string, probe: ProofProbe): Promise<ProofAnswer | RoundResult> {
    try {
      const answer = await askInParts(claim.n, probe, (part) =>
        this.messaging.request(AGENT_PROOF_PROBE, { challengeId, ...part }, { tokens: [machineId], timeoutMs: PROBE_TIMEOUT_MS }),
      );
      return 'wrong' in answer ? { kind: 'failed', reason: `${claim.label} ${answer.wrong}` } : answer;
    } catch (e) {
      return failure(claim, e, () => `${claim.label} did not answer its probe within ${PROBE_TIMEOUT_MS / 1000} s`);
    }
  }

  private async check({ claim, toCheck, macsPerSecond }: Answered): Promise<RoundResult> {
    const verdict = await this.checker.check(toCheck);
    if (!verdict.ok) return { kind: 'failed', reason: `${claim.label}: ${verdict.reason}` };
    return { kind: 'passed', macsPerSecond };
  }
}

/**
 * 503: nothing on the machine serves proofs; 501: no prover for this device on the machine (the
 * claim stays unproven); 429: more challenges at once than the agent takes (an agent from before
 * all GPUs were challenged together takes two: the claim stays unproven, as with 501, until it is
 * upgraded); 400: the agent refuses the request's shape (one from before n = 8192 and probes in
 * parts: unproven too, until upgraded); 504: too late; anything else: the agent's refusal.
 */
function failure(claim: DeviceClaim, e: unknown, onTimeout: () => string): RoundResult {
  if (!(e instanceof RequestError)) throw e;
  if (e.code === 503) return { kind: 'unanswered', reason: 'the machine does not answer hardware challenges (no prover listening)' };
  if (e.code === 501 || e.code === 429 || e.code === 400) return { kind: 'unproven', reason: `${claim.label} is unproven: ${e.message}` };
  if (e.code === 504) return { kind: 'failed', reason: onTimeout() };
  return { kind: 'failed', reason: `${claim.label} refused its challenge: ${e.message}` };
}

function lateReason(verdict: TimingVerdict): string {
  return verdict.ok ? 'no commitment' : verdict.reason;
}
