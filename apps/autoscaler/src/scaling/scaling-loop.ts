import { Injectable, Logger, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import { randomBytes } from 'node:crypto';
import { type Decision, decide, decideStopped, type Observation, policyFor, ScalingMemory } from '#tern/autoscaling';
import { pullsTasks, SCALE_COMMAND, SCALE_DECISION } from '#tern/contracts';
import { Messaging } from '#tern/messaging';
import { fireAndForget, Ticker } from '#tern/timing';
import { DeploymentCatalog, type TrackedVersion } from './deployment-catalog.js';
import { LeaderLock } from './leader-lock.js';
import { LoadBoard } from './load-board.js';
import { forgetVersion, recordDecision, recordStep } from './scaling-metrics.js';
import { TaskBacklog, withTaskBacklog } from './task-backlog.js';

export const TICK_MS = 1000;
/** Republish an unchanged command this often, so a scheduler that lost its state converges. */
export const KEEP_ALIVE_MS = 10_000;

interface VersionLoop {
  previous?: Decision;
  /** What this version's scaling learned (rates, durations, bursts); lost with the process, rebuilt from what it sees. */
  memory: ScalingMemory;
  publishedAt: number;
  running: boolean;
  again: boolean;
}

/**
 * One control loop per deployment version, all driven by one timer; a backlog event runs a
 * version's step at once. Publishes a ScaleCommand when the decision changes (and as a
 * keep-alive), a ScaleDecision when the desired count changes. Only the leader acts.
 */
@Injectable()
export class ScalingLoop implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger('scaling');
  private readonly loops = new Map<string, VersionLoop>();
  /** Makes message ids unique across restarts inside the stream's duplicate window. */
  private readonly boot = randomBytes(4).toString('hex');
  private sequence = 0;
  private readonly ticker = new Ticker({ name: 'scaling tick', everyMs: TICK_MS, logger: this.logger }, () => this.tick());

  constructor(
    private readonly catalog: DeploymentCatalog,
    private readonly board: LoadBoard,
    private readonly leader: LeaderLock,
    private readonly messaging: Messaging,
    private readonly tasks: TaskBacklog,
  ) {}

  onApplicationBootstrap() {
    this.ticker.start();
    // A task submitted to a queue at zero: decide now rather than at the next tick.
    this.tasks.onArrival((key) => {
      const v = this.catalog.get(key);
      if (v && !this.loops.get(key)?.previous?.desired) fireAndForget('scale step', this.logger, this.step(v));
    });
  }

  async onApplicationShutdown() {
    await this.ticker.stop();
  }

  async tick(): Promise<void> {
    if (!this.leader.isLeader()) {
      // A follower keeps no decisions: when it leads, it starts from the containers it sees.
      this.loops.clear();
      return;
    }
    await Promise.all(this.catalog.all().map((v) => this.step(v)));
  }

  /** Runs one control step for a version; a step asked for while one runs is run again after it. */
  async step(v: TrackedVersion): Promise<void> {
    if (!this.leader.isLeader()) return;
    let loop = this.loops.get(v.key);
    if (!loop) this.loops.set(v.key, (loop = { publishedAt: 0, running: false, again: false, memory: new ScalingMemory() }));
    if (loop.running) {
      loop.again = true;
      return;
    }
    loop.running = true;
    try {
      do {
        loop.again = false;
        await this.decideAndPublish(v, loop);
      } while (loop.again);
    } catch (e) {
      this.logger.warn({ deployment: v.key, err: (e as Error).message }, 'scale step failed; retrying next tick');
    } finally {
      loop.running = false;
    }
  }

  private async decideAndPublish(v: TrackedVersion, loop: VersionLoop) {
    const now = Date.now();
    const { record } = v;
    const reported = this.board.observe(v.key, now);
    const observation = pullsTasks(record.spec.kind)
      ? {
          ...withTaskBacklog(reported, await this.tasks.unsettled(record.deploymentId, record.version)),
          arrived: this.tasks.takeArrivals(v.key),
        }
      : reported;
    const d =
      v.removed || record.state !== 'active'
        ? decideStopped(loop.previous, observation, v.removed ? 'deployment removed' : 'deployment stopped', now)
        : decide({ policy: policyFor(record.spec, record.latest), previous: loop.previous, memory: loop.memory }, observation, now);
    recordStep(record, observation, d);
    const keepAlive = now - loop.publishedAt >= KEEP_ALIVE_MS && (d.desired > 0 || observation.containers.length > 0);
    if (d.changed || keepAlive) {
      await this.publish(v, d, loop.previous, observation);
      loop.publishedAt = now;
    }
    // Kept only once published, so a failed publish is still a change on the next tick.
    loop.previous = d;
    if (v.removed && d.desired === 0 && observation.containers.length === 0) {
      forgetVersion(record);
      this.catalog.forget(v.key);
      this.board.forget(v.key);
      this.loops.delete(v.key);
    }
  }

  private async publish(v: TrackedVersion, d: Decision, previous: Decision | undefined, o: Observation) {
    const { deploymentId, version, spec } = v.record;
    const issuedAt = new Date(d.decidedAt).toISOString();
    await this.messaging.publish(
      SCALE_COMMAND,
      { deploymentId, deploymentVersion: version, desired: d.desired, reason: d.reason, idleContainers: [...d.idleContainers], issuedAt },
      { tokens: [deploymentId], msgId: `scale.${deploymentId}.${version}.${this.boot}.${++this.sequence}` },
    );
    const before = previous?.desired ?? o.containers.length;
    if (previous && previous.desired === d.desired) return;
    recordDecision(v.record, before, d.desired);
    const policy = policyFor(spec, v.record.latest);
    await this.messaging.publish(
      SCALE_DECISION,
      {
        deploymentId,
        deploymentVersion: version,
        policy: policy.type,
        desired: d.desired,
        previous: before,
        min: policy.minContainers,
        max: policy.maxContainers,
        reason: d.reason,
        inputs: {
          queueDepth: o.buffered,
          inFlight: o.inFlight,
          containers: o.containers.length,
          idleContainers: d.idleContainers.length,
          ...(o.meanDurationMs > 0 ? { averageTaskSeconds: o.meanDurationMs / 1000 } : {}),
        },
        decidedAt: issuedAt,
      },
      { msgId: `decision.${deploymentId}.${version}.${this.boot}.${this.sequence}` },
    );
    this.logger.log({ deployment: v.key, desired: d.desired, previous: before, reason: d.reason }, 'scale decision');
  }
}
