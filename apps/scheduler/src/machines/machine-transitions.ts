import { Injectable } from '@nestjs/common';
import type { QueryRunner } from 'typeorm';
import { MACHINE_STATE_CHANGED, type MachineState, type MachineStateChanged, machineStateChangedMsgId } from '#tern/contracts';
import { Messaging } from '#tern/messaging';
import { queryRows } from '#tern/persistence';

export interface Transition {
  machineId: string;
  pool: string;
  from: MachineState | null;
  to: MachineState;
  reason: string;
  changedAt: Date;
}

/**
 * Persists and announces machine state changes. Callers run inside a transaction and publish
 * before it commits: a failed publish rolls the change back, to be tried again on the next
 * heartbeat or sweep, so no persisted change goes unannounced (a commit that fails after the
 * publish can announce one twice, which readers tolerate: delivery is at-least-once anyway).
 */
@Injectable()
export class MachineTransitions {
  constructor(private readonly messaging: Messaging) {}

  /** Moves a machine from `from` to `to` if it is still in `from` (the caller holds its row lock). */
  async move(runner: QueryRunner, machineId: string, from: MachineState, to: MachineState, reason: string): Promise<Transition | undefined> {
    const [row] = await queryRows<{ pool: string; state_changed_at: Date }>(
      runner,
      `UPDATE machines SET state = $3, state_reason = $4, state_changed_at = now(), updated_at = now()
       WHERE id = $1 AND state = $2
       RETURNING pool, state_changed_at`,
      [machineId, from, to, reason],
    );
    if (!row) return undefined;
    const transition = { machineId, pool: row.pool, from, to, reason, changedAt: row.state_changed_at };
    await this.announce(transition);
    return transition;
  }

  async announce(t: Transition): Promise<void> {
    const event: MachineStateChanged = {
      machineId: t.machineId,
      pool: t.pool,
      from: t.from,
      to: t.to,
      reason: t.reason,
      changedAt: t.changedAt.toISOString(),
    };
    await this.messaging.publish(MACHINE_STATE_CHANGED, event, { msgId: machineStateChangedMsgId(event) });
  }
}
