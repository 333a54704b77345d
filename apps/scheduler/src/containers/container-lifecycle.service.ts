import { Injectable } from '@nestjs/common';
import { ContainersRepository } from '#tern/persistence';
import { CONTAINER_STATE_ORDER, type LifecycleEvent, progressFor } from './container-progress.js';

export type RecordOutcome = 'updated' | 'inserted' | 'unknown-deployment-version';

/**
 * Records container lifecycle events in the containers table; idempotent, so redelivery is
 * harmless. Forward-only (see ContainersRepository.applyProgress); the first event of a
 * container the scheduler has no row for inserts it (placement inserts rows itself; until then
 * every container arrives this way).
 */
@Injectable()
export class ContainerLifecycleService {
  constructor(private readonly containers: ContainersRepository) {}

  async record(e: LifecycleEvent): Promise<RecordOutcome> {
    const p = progressFor(e);
    const { containerId, machineId, deploymentId, deploymentVersion } = e.event;
    if (await this.containers.applyProgress(containerId, machineId, p, CONTAINER_STATE_ORDER)) return 'updated';
    if (await this.containers.insertFromEvent(containerId, machineId, p, deploymentId, deploymentVersion)) return 'inserted';
    // Nothing inserted: another replica inserted it a moment ago, or the version is unknown.
    if (await this.containers.applyProgress(containerId, machineId, p, CONTAINER_STATE_ORDER)) return 'updated';
    return 'unknown-deployment-version';
  }
}
