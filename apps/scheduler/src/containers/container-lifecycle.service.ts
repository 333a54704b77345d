import { Inject, Injectable } from '@nestjs/common';
import { TERN_CONFIG, type TernConfig } from '#tern/config';
import { ContainersRepository, CrashLoopsRepository } from '#tern/persistence';
import { crashResetMs } from '#tern/placement';
import { CONTAINER_STATE_ORDER, type LifecycleEvent, progressFor } from './container-progress.js';

export type RecordOutcome = 'updated' | 'inserted' | 'unknown-deployment-version';

/**
 * Records container lifecycle events in the containers table; idempotent, so redelivery is
 * harmless. Forward-only (see ContainersRepository.applyProgress); the first event of a
 * container the scheduler has no row for inserts it (placement inserts rows itself; until then
 * every container arrives this way). A failure the row had not recorded yet, other than its
 * machine's loss, is a crash of the version's code: it counts towards the version's crash loop.
 */
@Injectable()
export class ContainerLifecycleService {
  constructor(
    private readonly containers: ContainersRepository,
    private readonly crashLoops: CrashLoopsRepository,
    @Inject(TERN_CONFIG) private readonly config: TernConfig,
  ) {}

  async record(e: LifecycleEvent): Promise<RecordOutcome> {
    const outcome = await this.apply(e);
    if (outcome !== 'unknown-deployment-version' && e.kind === 'failed' && e.event.phase !== 'machine-lost') {
      const { containerId, at, phase, error, exitCode, lastLines } = e.event;
      const resetSeconds = crashResetMs(this.config.containers.crashBackoff) / 1000;
      await this.crashLoops.recordCrash(
        containerId,
        at,
        { phase, error, exitCode: exitCode ?? null, lastLines: lastLines ?? [] },
        resetSeconds,
      );
    }
    return outcome;
  }

  private async apply(e: LifecycleEvent): Promise<RecordOutcome> {
    const p = progressFor(e);
    const { containerId, machineId, deploymentId, deploymentVersion } = e.event;
    if (await this.containers.applyProgress(containerId, machineId, p, CONTAINER_STATE_ORDER)) return 'updated';
    if (await this.containers.insertFromEvent(containerId, machineId, p, deploymentId, deploymentVersion)) return 'inserted';
    // Nothing inserted: another replica inserted it a moment ago, or the version is unknown.
    if (await this.containers.applyProgress(containerId, machineId, p, CONTAINER_STATE_ORDER)) return 'updated';
    return 'unknown-deployment-version';
  }
}
