import { Inject, Injectable, Logger, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import { TERN_CONFIG, type TernConfig } from '#tern/config';
import { TasksRepository } from '#tern/persistence';
import { spotCheckOverdue } from '#tern/tasks';
import { Ticker } from '#tern/timing';
import { spotCheckVerdicts } from './spot-checks.js';

export const SPOT_CHECK_SWEEP_EVERY_MS = 10_000;
/** Pending checks read per sweep, oldest first; the rest wait for the next tick. */
export const SPOT_CHECK_SWEEP_BATCH = 1000;

/**
 * The sweeper of spot checks whose verifier never answered (the machine went offline, the core
 * NATS ask was lost, the agent dropped it): past the task's timeout plus SPOT_CHECK_MARGIN_SECONDS
 * a pending check becomes `expired`. Nothing is told to reputation, so an expired check counts
 * against neither machine: silence proves nothing about the result checked, and a verifier that
 * drops its work is already seen by its heartbeats and container events. Each check is settled
 * by one conditional UPDATE (the same as an answer's), so of two replicas, or of a late answer
 * and the sweep, exactly one settles it.
 */
@Injectable()
export class SpotCheckExpiry implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger('spot-check-expiry');
  private readonly ticker = new Ticker({ name: 'spot-check expiry', everyMs: SPOT_CHECK_SWEEP_EVERY_MS, logger: this.logger }, () =>
    this.run(),
  );

  constructor(
    private readonly tasks: TasksRepository,
    @Inject(TERN_CONFIG) private readonly config: TernConfig,
  ) {}

  onApplicationBootstrap() {
    this.ticker.start();
  }

  async onApplicationShutdown() {
    await this.ticker.stop();
  }

  /** Expires the overdue pending checks; answers how many this replica expired. */
  async run(now = new Date()): Promise<number> {
    const margin = this.config.tasks.spotCheckMarginSeconds;
    let expired = 0;
    for (const { taskId, timeoutSeconds, spotCheck: c } of await this.tasks.pendingSpotChecks(SPOT_CHECK_SWEEP_BATCH)) {
      if (!c.verifierMachineId || !c.verifierContainerId || !spotCheckOverdue(c, timeoutSeconds, margin, now)) continue;
      const settled = await this.tasks.settleSpotCheck(
        taskId,
        { machineId: c.verifierMachineId, containerId: c.verifierContainerId },
        {
          state: 'expired',
          reason: `the verifier ${c.verifierMachineId} did not answer within ${timeoutSeconds + margin} s (the task's timeout and SPOT_CHECK_MARGIN_SECONDS)`,
          checkedAt: now.toISOString(),
        },
      );
      if (!settled) continue;
      spotCheckVerdicts.inc({ outcome: 'expired' });
      expired += 1;
    }
    if (expired) this.logger.log(`${expired} spot check(s) expired: their verifiers never answered`);
    return expired;
  }
}
