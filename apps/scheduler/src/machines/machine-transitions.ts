import { Injectable } from '@nestjs/common';
import { MACHINE_STATE_CHANGED, type MachineState, type MachineStateChanged, machineStateChangedMsgId } from '#tern/contracts';
import { Messaging } from '#tern/messaging';
import { type MachinesRepository } from '#tern/persistence';
import { countStateChange } from './machine-metrics.js';

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

  /** Moves a machine from `from` to `to` if it is still in `from` (`tx`: the caller's transaction, holding its row lock). */
  async move(
    tx: MachinesRepository,
    machineId: string,
    from: MachineState,
    to: MachineState,
    reason: string,
  ): Promise<Transition | undefined> {
    const moved = await tx.moveState(machineId, from, to, reason);
    if (!moved) return undefined;
    const transition = { machineId, pool: moved.pool, from, to, reason, changedAt: moved.changedAt };
    await this.announce(transition);
    return transition;
  }

  async announce(t: Transition): Promise<void> {
    countStateChange(t.from, t.to);
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
