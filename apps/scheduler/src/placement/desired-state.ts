import { Injectable } from '@nestjs/common';
import { type ScaleCommand } from '#tern/contracts';
import { ContainersRepository } from '#tern/persistence';

export type ScaleOutcome = 'applied' | 'stale' | 'unknown-deployment-version';

/**
 * The desired container count per deployment version, from the autoscaler's scale commands.
 * A command applies only if it is newer than the one the version holds (commands can be
 * redelivered or overtake each other).
 */
@Injectable()
export class DesiredState {
  constructor(private readonly containers: ContainersRepository) {}

  async apply(cmd: ScaleCommand): Promise<ScaleOutcome> {
    const { deploymentId, deploymentVersion, desired, reason, issuedAt, idleContainers } = cmd;
    if (await this.containers.applyDesired({ deploymentId, deploymentVersion, desired, reason, issuedAt, idleContainers }))
      return 'applied';
    return (await this.containers.versionExists(deploymentId, deploymentVersion)) ? 'stale' : 'unknown-deployment-version';
  }
}
