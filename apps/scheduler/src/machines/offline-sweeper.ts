import { Inject, Injectable, Logger, type OnApplicationBootstrap, type OnModuleDestroy } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { queryRows } from '#tern/persistence';
import { TERN_CONFIG, type TernConfig } from '#tern/config';
import { type MachineState } from '#tern/contracts';
import { MachineTransitions } from './machine-transitions.js';

interface Swept {
  id: string;
  pool: string;
  from_state: MachineState;
  state_reason: string;
  state_changed_at: Date;
}

/**
 * One statement finds and moves every machine that has been silent for longer than the TTL.
 * Rows are claimed with FOR UPDATE SKIP LOCKED and re-checked by the UPDATE, so with several
 * scheduler replicas each machine is moved, and announced, by exactly one of them; a machine
 * whose heartbeat is being recorded right now (row locked) is left for the next sweep.
 * A registered machine that never sends a first heartbeat goes offline the same way.
 */
const SWEEP = `
  WITH stale AS (
    SELECT id, state FROM machines
    WHERE state IN ('registered', 'ready', 'unschedulable')
      AND (last_heartbeat_at < now() - make_interval(secs => $1::int)
           OR (last_heartbeat_at IS NULL AND COALESCE(registered_at, state_changed_at) < now() - make_interval(secs => $1::int)))
    ORDER BY id
    LIMIT 500
    FOR UPDATE SKIP LOCKED
  )
  UPDATE machines m
  SET state = 'offline',
      state_reason = CASE
        WHEN m.last_heartbeat_at IS NULL THEN format('no heartbeat within %s s of registering', $1::int)
        ELSE format('no heartbeat for %s s (last at %s)', $1::int, to_char(m.last_heartbeat_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'))
      END,
      state_changed_at = now(),
      updated_at = now()
  FROM stale
  WHERE m.id = stale.id AND m.state = stale.state
  RETURNING m.id, m.pool, stale.state AS from_state, m.state_reason, m.state_changed_at`;

@Injectable()
export class OfflineSweeper implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger('offline-sweeper');
  private timer?: NodeJS.Timeout;
  private running?: Promise<unknown>;

  constructor(
    private readonly dataSource: DataSource,
    private readonly transitions: MachineTransitions,
    @Inject(TERN_CONFIG) private readonly config: TernConfig,
  ) {}

  onApplicationBootstrap() {
    // At most half a TTL late, and at least every second so a short TTL is honoured closely.
    const everyMs = Math.min(1000, (this.config.machines.heartbeatTtlSeconds * 1000) / 2);
    this.timer = setInterval(() => this.tick(), everyMs);
  }

  async onModuleDestroy() {
    clearInterval(this.timer);
    await this.running;
  }

  private tick() {
    if (this.running) return;
    this.running = this.sweep()
      .catch((e: unknown) => this.logger.warn(`sweep failed (${(e as Error).message}); retrying on the next tick`))
      .finally(() => (this.running = undefined));
  }

  /** Moves silent machines offline and announces each move; returns how many moved. */
  async sweep(): Promise<number> {
    return this.dataSource.transaction(async (m) => {
      const rows = await queryRows<Swept>(m.queryRunner!, SWEEP, [this.config.machines.heartbeatTtlSeconds]);
      for (const r of rows) {
        await this.transitions.announce({
          machineId: r.id,
          pool: r.pool,
          from: r.from_state,
          to: 'offline',
          reason: r.state_reason,
          changedAt: r.state_changed_at,
        });
        this.logger.warn({ machineId: r.id, from: r.from_state, reason: r.state_reason }, `machine ${r.id}: ${r.from_state} → offline`);
      }
      return rows.length;
    });
  }
}
