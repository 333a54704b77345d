import { Inject, Injectable, Logger, type OnApplicationBootstrap, type OnModuleDestroy } from '@nestjs/common';
import { TERN_CONFIG, type TernConfig } from '#tern/config';
import { type ClaimedMachine, MachineVerificationRepository } from '#tern/persistence';
import { type ChallengeOutcome, deviceClaims, formatRate, nextChallengeDelayMs, verificationAfter } from '#tern/proof';
import { Ticker } from '#tern/timing';
import { Reconciler } from '../placement/reconciler.js';
import { ProofRounds } from './proof-rounds.js';
import { countChallenge } from './verification-metrics.js';

/** How often the verifier looks for machines due: a joining machine waits at most this long for its first challenge. */
const TICK_MS = 1000;
/** Machines challenged at once by one scheduler. */
const BATCH = 4;
/** ±50 % around the configured interval. */
const JITTER = 0.5;
/** A machine that does not answer is asked again this soon (an agent starting, or one without a prover). */
const UNANSWERED_RETRY_MS = 60_000;
/** A quarantined machine is asked again this soon at the latest (it may have been overloaded once). */
const QUARANTINED_RETRY_MS = 5 * 60_000;
/** A machine whose GPUs run work is looked at again this soon: its challenge waits for them to be free. */
const BUSY_RETRY_MS = 10 * 60_000;
/**
 * Challenge intervals a verified machine's GPUs may stay busy past its last challenge and still
 * count as proven: past them it is unverified until a challenge finds its GPUs free.
 */
const BUSY_INTERVALS = 4;
/**
 * How long a claimed machine is this scheduler's: longer than the longest challenge (the CPU's round,
 * then every GPU's at once: prepare steps of at most 120 s, a commitment deadline of a few seconds,
 * probes of at most 15 s, and the checks, two threads at a time). A scheduler
 * that dies mid-challenge leaves the machine to be challenged again after it.
 */
const LEASE_MS = 10 * 60_000;

/**
 * Challenges machines to prove the hardware they claim (libs/proof): each heartbeating machine
 * whose challenge is due (at join, after an inventory change, at random times after each one):
 * the CPU first, then every claimed GPU at once. The verdict and its reason go on the machine's row
 * (`tern machine show`); placement reads them (libs/placement trust tiers).
 */
@Injectable()
export class MachineVerifier implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger('verification');
  private readonly ticker = new Ticker({ name: 'machine verifier', everyMs: TICK_MS, logger: this.logger }, () => this.pass());

  constructor(
    private readonly repository: MachineVerificationRepository,
    private readonly rounds: ProofRounds,
    private readonly reconciler: Reconciler,
    @Inject(TERN_CONFIG) private readonly config: TernConfig,
  ) {}

  onApplicationBootstrap() {
    this.ticker.start();
  }

  async onModuleDestroy() {
    await this.ticker.stop();
  }

  async pass(): Promise<void> {
    const due = await this.repository.claimDue(BATCH, LEASE_MS);
    await Promise.all(due.map((m) => this.verify(m)));
  }

  private async verify(machine: ClaimedMachine): Promise<void> {
    if (machine.gpus.length > 0 && machine.gpusInUse > 0) return this.waitForFreeGpus(machine);
    const outcome = await this.challenge(machine);
    const verdict = verificationAfter(outcome);
    const interval = nextChallengeDelayMs(this.config.verification.challengeIntervalSeconds * 1000, JITTER);
    const next = {
      unanswered: UNANSWERED_RETRY_MS,
      unproven: interval,
      failed: Math.min(interval, QUARANTINED_RETRY_MS),
      passed: interval,
    }[outcome.kind];
    const before = await this.repository.record(machine, verdict, next);
    if (before === undefined) return;
    if (before !== verdict.state)
      this.logger.log(
        { machineId: machine.id, from: before, to: verdict.state, reason: verdict.reason },
        `machine ${machine.id}: ${before} → ${verdict.state}`,
      );
    // Work waiting for a verified machine should not sit out its back-off.
    if (verdict.state === 'verified' && before !== 'verified') {
      this.reconciler.resetBackoff();
      this.reconciler.wake();
    }
  }

  /**
   * A GPU's challenge would share the device with the work placed on it (slower, its memory
   * taken), failing an honest machine, so it waits for the GPUs to be free: the machine keeps its
   * state, and is looked at again in BUSY_RETRY_MS. That it is busy is the control plane's own
   * record of what it placed there, not the machine's word. A verified machine busy for longer
   * than BUSY_INTERVALS intervals since its last challenge is no longer counted as proven: it
   * becomes unverified (its running work goes on; new work that asks for verified machines goes
   * elsewhere) until a challenge finds its GPUs free.
   */
  private async waitForFreeGpus(machine: ClaimedMachine): Promise<void> {
    countChallenge('gpu', 'busy');
    const limitMs = BUSY_INTERVALS * this.config.verification.challengeIntervalSeconds * 1000;
    const sinceMs = machine.checkedAt ? Date.now() - machine.checkedAt.getTime() : 0;
    if (machine.verification !== 'verified' || sinceMs <= limitMs) return this.repository.defer(machine.id, BUSY_RETRY_MS);
    const reason = `its GPUs have run work since its last challenge ${Math.round(sinceMs / 3_600_000)} h ago: verified again once a challenge finds them free`;
    const before = await this.repository.record(machine, { state: 'unverified', reason }, BUSY_RETRY_MS);
    if (before === 'verified') this.logger.log({ machineId: machine.id, reason }, `machine ${machine.id}: verified → unverified`);
  }

  /**
   * The CPU's round first, then every GPU's at once (ProofRounds: one start for all, so one real
   * GPU cannot answer for several in turn); the first device, in that order, that fails decides.
   */
  private async challenge(machine: ClaimedMachine): Promise<ChallengeOutcome> {
    const [cpu, ...gpus] = deviceClaims(machine);
    const proven: string[] = [];
    for (const claims of [[cpu!], gpus].filter((group) => group.length > 0)) {
      const results = await this.rounds
        .prove(machine.id, claims)
        .catch((e: Error) => claims.map(() => ({ kind: 'unanswered' as const, reason: e.message })));
      results.forEach((result, i) => countChallenge(claims[i]!.device, result.kind));
      for (const [i, result] of results.entries()) {
        if (result.kind !== 'passed') return result;
        proven.push(`${claims[i]!.label} at ${formatRate(result.macsPerSecond)} multiply-adds/s`);
      }
    }
    return { kind: 'passed', summary: `proved ${proven.join('; ')}` };
  }
}
