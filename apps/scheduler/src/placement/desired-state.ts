import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { type ScaleCommand } from '#tern/contracts';
import { queryRows } from '#tern/persistence';

export type ScaleOutcome = 'applied' | 'stale' | 'unknown-deployment-version';

/**
 * Applies a scale command only if it is newer than the one the version holds (commands can be
 * redelivered or overtake each other): the stored issuedAt is the version's desired_at.
 */
const APPLY = `
  UPDATE deployment_versions dv
  SET desired_containers = $3, desired_reason = $4, desired_at = $5::timestamptz, idle_containers = $6::text[]
  WHERE dv.deployment_id::text = $1 AND dv.version = $2 AND (dv.desired_at IS NULL OR dv.desired_at < $5::timestamptz)
  RETURNING dv.id`;

/** The desired container count per deployment version, from the autoscaler's scale commands. */
@Injectable()
export class DesiredState {
  constructor(private readonly dataSource: DataSource) {}

  async apply(cmd: ScaleCommand): Promise<ScaleOutcome> {
    const runner = this.dataSource.createQueryRunner();
    try {
      const applied = await queryRows(runner, APPLY, [cmd.deploymentId, cmd.deploymentVersion, cmd.desired, cmd.reason, cmd.issuedAt, cmd.idleContainers]);
      if (applied.length) return 'applied';
      const known = await queryRows(runner, `SELECT 1 FROM deployment_versions WHERE deployment_id::text = $1 AND version = $2`, [cmd.deploymentId, cmd.deploymentVersion]);
      return known.length ? 'stale' : 'unknown-deployment-version';
    } finally {
      await runner.release();
    }
  }
}
