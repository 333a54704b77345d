import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { TransactionalRepository } from './transactional.repository.js';

/** What a version's last crash said, as its container's failure reported it. */
export interface LastCrash {
  containerId: string;
  /** Where it failed (runtime, health, start, image, create) and how. */
  phase: string;
  error: string;
  exitCode: number | null;
  lastLines: string[];
}

/**
 * Containers of a version that crashed in a row (`crash_count`, `last_crash_at`, `last_crash` on
 * deployment_versions), written by the scheduler from container failures and read with the
 * version by its reconciler (the back-off, see crashWaitMs) and by the gateway's deployment view.
 */
@Injectable()
export class CrashLoopsRepository extends TransactionalRepository {
  constructor(db: DataSource) {
    super(db);
  }

  /**
   * Counts a crash of `containerId` against its version. The count starts over at 1 when the
   * version's last crash is older than `resetSeconds`, or when this container had run ready for
   * that long (Kubernetes resets a loop after ten minutes of running). A failure delivered again
   * right after it was counted is not counted twice.
   */
  async recordCrash(containerId: string, at: string, crash: Omit<LastCrash, 'containerId'>, resetSeconds: number): Promise<void> {
    await this.rows(
      `UPDATE deployment_versions dv
       SET crash_count = CASE
             WHEN dv.last_crash_at IS NULL OR $2::timestamptz - dv.last_crash_at > make_interval(secs => $4)
               OR (c.ready_at IS NOT NULL AND $2::timestamptz - c.ready_at > make_interval(secs => $4)) THEN 1
             ELSE dv.crash_count + 1 END,
           last_crash_at = GREATEST(dv.last_crash_at, $2::timestamptz),
           last_crash = $3::jsonb
       FROM containers c
       WHERE c.id = $1 AND dv.id = c.deployment_version_id AND dv.last_crash->>'containerId' IS DISTINCT FROM $1`,
      [containerId, at, JSON.stringify({ containerId, ...crash }), resetSeconds],
    );
  }
}
