import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { queryRows } from '#tern/persistence';
import { CONTAINER_STATE_ORDER, type ContainerProgress, type LifecycleEvent, progressFor } from './container-progress.js';

export type RecordOutcome = 'updated' | 'inserted' | 'unknown-deployment-version';

/**
 * Forward-only: the state moves only to a later one in CONTAINER_STATE_ORDER, timestamps keep
 * the earliest value seen (each event type has its own consumer, so they arrive in any order;
 * LEAST ignores NULL), the exit code its last known one. The machine is set only if it still
 * exists (a removed machine must not make the event fail on the foreign key). `requested` is
 * merged, so what the agent reports keeps the GPU indexes the scheduler reserved.
 */
const UPDATE = `
  UPDATE containers c SET
    state = CASE WHEN array_position($11::text[], $3::text) > array_position($11::text[], c.state::text) THEN $3::varchar ELSE c.state END,
    state_reason = CASE WHEN array_position($11::text[], $3::text) > array_position($11::text[], c.state::text) THEN $4::text ELSE c.state_reason END,
    machine_id = COALESCE((SELECT id FROM machines WHERE id = $2::text), c.machine_id),
    requested = c.requested || COALESCE($5::jsonb, '{}'::jsonb),
    started_at = LEAST(c.started_at, $6::timestamptz),
    ready_at = LEAST(c.ready_at, $7::timestamptz),
    stopped_at = LEAST(c.stopped_at, $8::timestamptz),
    exit_code = COALESCE($9::int, c.exit_code),
    oom_killed = c.oom_killed OR COALESCE($10::boolean, false),
    updated_at = now()
  WHERE c.id = $1::text
  RETURNING c.id`;

/**
 * First event for a container the scheduler has no row for (placement will insert rows
 * itself; until then every container arrives this way). The row needs its deployment version,
 * found from the event's deployment id and version number. `requested` is {} until an event
 * that carries the resources (scheduled, started) arrives.
 */
const INSERT = `
  INSERT INTO containers (id, deployment_version_id, machine_id, state, state_reason, requested, started_at, ready_at, stopped_at, exit_code, oom_killed)
  SELECT $1::text, dv.id, (SELECT id FROM machines WHERE id = $2::text), $3::varchar, $4::text, COALESCE($5::jsonb, '{}'::jsonb),
         $6::timestamptz, $7::timestamptz, $8::timestamptz, $9::int, COALESCE($10::boolean, false)
  FROM deployment_versions dv
  WHERE dv.deployment_id::text = $11::text AND dv.version = $12::int
  ON CONFLICT (id) DO NOTHING
  RETURNING id`;

/** Records container lifecycle events in the containers table; idempotent, so redelivery is harmless. */
@Injectable()
export class ContainerLifecycleService {
  constructor(private readonly dataSource: DataSource) {}

  async record(e: LifecycleEvent): Promise<RecordOutcome> {
    const p = progressFor(e);
    const values = columns(e.event.containerId, e.event.machineId, p);
    const runner = this.dataSource.createQueryRunner();
    try {
      if ((await queryRows(runner, UPDATE, [...values, CONTAINER_STATE_ORDER])).length) return 'updated';
      if ((await queryRows(runner, INSERT, [...values, e.event.deploymentId, e.event.deploymentVersion])).length) return 'inserted';
      // Nothing inserted: another replica inserted it a moment ago, or the version is unknown.
      if ((await queryRows(runner, UPDATE, [...values, CONTAINER_STATE_ORDER])).length) return 'updated';
      return 'unknown-deployment-version';
    } finally {
      await runner.release();
    }
  }
}

function columns(containerId: string, machineId: string, p: ContainerProgress): unknown[] {
  return [
    containerId,
    machineId,
    p.state,
    p.reason,
    p.requested ? JSON.stringify(p.requested) : null,
    p.startedAt ?? null,
    p.readyAt ?? null,
    p.stoppedAt ?? null,
    p.exitCode ?? null,
    p.oomKilled ?? null,
  ];
}
