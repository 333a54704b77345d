import { Inject, Injectable, Logger, type OnModuleDestroy } from '@nestjs/common';
import { join } from 'node:path';
import {
  type HardwareAnswer,
  type HardwareChallenge,
  type HardwareProbe,
  type HardwareProverPrepare,
  type HardwareProverReady,
  INVENTORY_LIMITS,
} from '#tern/contracts';
import { ReplyError } from '#tern/messaging';
import { fireAndForget } from '#tern/timing';
import { AGENT_CONTEXT, type AgentContext } from '../agent-context.js';
import { findRunnersDir } from '../code/runners-dir.js';
import { CONTAINER_RUNTIME, type RuntimeHandle, runtimeLogger } from '../containers/container-runtime.provider.js';
import { GpuHolders } from '../containers/gpu-holders.js';
import { GpuProver, proverPython } from './gpu-prover.js';
import { type ProverChoices, proverFor } from './prover-for.js';
import type { Prover, ProverFactory } from './prover.js';

/**
 * A ready prover waits this long for its seed, then it is dropped. The scheduler sends the seeds of
 * all a machine's GPUs at once, when the last of them is ready: up to its prepare limit (120 s)
 * after the first.
 */
const SEED_WAIT_MS = 150_000;
/** A challenge waits this long for its probe after the commitment, then its product is dropped. */
const PROBE_WAIT_MS = 30_000;
/**
 * Challenges held at once: the scheduler challenges the CPU, then every claimed GPU at once (at most
 * INVENTORY_LIMITS.gpus), and may overlap one more round; more is not its doing.
 */
export const MAX_OPEN = INVENTORY_LIMITS.gpus + 2;

/** The ProverFactory's injection token. */
export const PROVERS = Symbol('PROVERS');

/** The agent's provers: the CPU's, and GpuProver on its own runtime with Tern's runners. */
export const provers = {
  provide: PROVERS,
  inject: [AGENT_CONTEXT, CONTAINER_RUNTIME],
  useFactory: (ctx: AgentContext, handle: RuntimeHandle): ProverFactory => {
    const runnersDir = findRunnersDir();
    const python = proverPython();
    const logger = runtimeLogger('proofs');
    const gpuProver: ProverChoices['gpuProver'] = !handle.runtime
      ? { unavailable: `no container runtime (${handle.problem})` }
      : !runnersDir
        ? { unavailable: "Tern's runners are not installed with this agent (set AGENT_RUNNERS_DIR)" }
        : (request, gpu) =>
            new GpuProver(request, {
              runtime: handle.runtime,
              runnersDir,
              gpu: { index: gpu.index, ...(gpu.uuid ? { uuid: gpu.uuid } : {}) },
              workDir: join(ctx.settings.stateDir, 'proofs'),
              ...python,
              logger,
            });
    return (challenge) => proverFor(challenge, { gpus: ctx.inventory.gpus, gpuProver });
  },
};

/**
 * The agent's side of proof of hardware: a prover per challenge, got ready before the seed comes
 * (untimed), kept from the commitment to the probe, dropped at each step's deadline (the scheduler
 * has stopped waiting by then) or once answered.
 */
@Injectable()
export class ProofsService implements OnModuleDestroy {
  private readonly logger = new Logger('proofs');
  private readonly open = new Map<string, { prover: Prover; timer: NodeJS.Timeout; ready: boolean; device: string }>();

  /**
   * A GPU under challenge is held, as a container's or a sandbox's GPU is, from its prepare step to
   * its release: a start arriving meanwhile gets another GPU or is refused (and placed again), and
   * does not share the device with the product being timed. Only NVIDIA GPUs get a prover.
   */
  constructor(
    @Inject(PROVERS) private readonly provers: ProverFactory,
    gpuHolders: GpuHolders,
  ) {
    gpuHolders.add(() => [...this.open.values()].filter((h) => h.device.startsWith('gpu:')).map((h) => `nvidia:${h.device.slice(4)}`));
  }

  async prepare(request: HardwareProverPrepare): Promise<HardwareProverReady> {
    if (this.open.has(request.challengeId)) throw new ReplyError(409, `challenge ${request.challengeId} is under way already`);
    if (this.open.size >= MAX_OPEN) throw new ReplyError(429, `${MAX_OPEN} challenges are under way already`);
    const prover = this.provers(request);
    this.hold(request.challengeId, prover, request.deadlineMs, false, request.device);
    try {
      const ready = await prover.prepare();
      this.hold(request.challengeId, prover, SEED_WAIT_MS, true, request.device);
      this.logger.log(
        { challengeId: request.challengeId, device: request.device, n: request.n, allocatedBytes: ready.allocatedBytes },
        `a prover is ready on ${request.device}`,
      );
      return ready.allocatedBytes === undefined ? {} : { allocatedBytes: ready.allocatedBytes };
    } catch (e) {
      await this.drop(request.challengeId);
      throw asReply(e, `the prover on ${request.device} did not get ready`);
    }
  }

  /**
   * Commits with the prover the prepare step got ready. A challenge with none (a scheduler from
   * before the prepare step) gets one now, inside its window, as it always did.
   */
  async challenge(challenge: HardwareChallenge): Promise<string> {
    if (!this.open.has(challenge.challengeId)) await this.prepare(challenge);
    const held = this.open.get(challenge.challengeId);
    if (!held) throw new ReplyError(404, `no prover ready for challenge ${challenge.challengeId} (past its wait)`);
    if (!held.ready) throw new ReplyError(409, `challenge ${challenge.challengeId} is under way already`);
    const { prover } = held;
    this.hold(challenge.challengeId, prover, challenge.deadlineMs, false, challenge.device);
    try {
      const root = await prover.commit(challenge.seed);
      this.hold(challenge.challengeId, prover, PROBE_WAIT_MS, false, challenge.device);
      this.logger.log(
        { challengeId: challenge.challengeId, device: challenge.device, n: challenge.n },
        `committed to a ${challenge.n}×${challenge.n} product on ${challenge.device}`,
      );
      return root;
    } catch (e) {
      await this.drop(challenge.challengeId);
      throw asReply(e, `the prover on ${challenge.device} failed`);
    }
  }

  /** Answers a probe, or a part of one: the product is kept for the next part while `more` says one follows. */
  async probe(probe: HardwareProbe): Promise<HardwareAnswer> {
    const held = this.open.get(probe.challengeId);
    if (!held) throw new ReplyError(404, `no committed challenge ${probe.challengeId} (answered, or past its deadline)`);
    let kept = false;
    try {
      const answer = await held.prover.answer(probe);
      if (probe.more) {
        this.hold(probe.challengeId, held.prover, PROBE_WAIT_MS, false, held.device);
        kept = true;
      }
      return answer;
    } finally {
      if (!kept) await this.drop(probe.challengeId);
    }
  }

  async onModuleDestroy() {
    await Promise.all([...this.open.keys()].map((id) => this.drop(id)));
  }

  /** (Re)arms the challenge's timer: past it, its prover is released. `ready`: waiting for its seed. */
  private hold(id: string, prover: Prover, ms: number, ready: boolean, device: string): void {
    const held = this.open.get(id);
    if (held) clearTimeout(held.timer);
    const timer = setTimeout(() => fireAndForget(`dropping challenge ${id}`, this.logger, () => this.drop(id)), ms);
    timer.unref();
    this.open.set(id, { prover, timer, ready, device });
  }

  private async drop(id: string): Promise<void> {
    const held = this.open.get(id);
    if (!held) return;
    this.open.delete(id);
    clearTimeout(held.timer);
    await held.prover.release().catch((e: Error) => this.logger.warn({ challengeId: id, err: e.message }, 'releasing a prover failed'));
  }
}

/** The reason goes to the scheduler (and on to `tern machine show`), not a bare "internal error". */
function asReply(e: unknown, what: string): ReplyError {
  if (e instanceof ReplyError) return e;
  return new ReplyError(500, `${what}: ${(e as Error).message}`);
}
