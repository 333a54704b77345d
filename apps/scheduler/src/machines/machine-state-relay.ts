import { Injectable } from '@nestjs/common';
import { MACHINE_STATE_CHANGED, type MachineStateChanged, machineStateChangedMsgId } from '#tern/contracts';
import { Messaging } from '#tern/messaging';
import { MachinesRepository, type StateOutboxEntry } from '#tern/persistence';
import { mapLimit } from '#tern/timing';
import { countStateChange } from './machine-metrics.js';
import { OutboxRelay } from './outbox-relay.js';

/** Outbox rows read per round. */
const ROUND = 500;
/** Machines whose moves are published at once (each machine's own moves one after another). */
const MACHINES_AT_ONCE = 32;

/**
 * Announces the machine state changes committed to the outbox (`machine_state_outbox`), so a
 * transition's row lock never waits on NATS and a committed move is never unannounced: a
 * scheduler killed between commit and publish leaves the row for the next relay. The message
 * id comes from the row (machine, state, time), so a relay killed after publishing and before
 * deleting announces the move again only as a duplicate JetStream drops. Poked after each commit
 * that moved a machine; a ticker catches the rest (another replica's or a dead process's rows).
 */
@Injectable()
export class MachineStateRelay extends OutboxRelay {
  constructor(
    private readonly machines: MachinesRepository,
    private readonly messaging: Messaging,
  ) {
    super('machine state relay', ROUND);
  }

  /** Oldest first, while no other relay holds the outbox (so each machine's moves go out in order). */
  protected round(limit: number) {
    return this.machines.transaction(async (tx) => {
      const entries = await tx.claimStateOutbox(limit);
      const published = await this.publish(entries);
      await tx.deleteStateOutbox(published);
      return { read: entries.length, published: published.length };
    });
  }

  /**
   * Each machine's moves in order, a machine's later moves left in the outbox after one fails (so
   * they are never announced ahead of it); returns the ids published.
   */
  private async publish(entries: StateOutboxEntry[]): Promise<string[]> {
    const byMachine = new Map<string, StateOutboxEntry[]>();
    for (const e of entries) {
      const moves = byMachine.get(e.machineId);
      if (moves) moves.push(e);
      else byMachine.set(e.machineId, [e]);
    }
    const published: string[] = [];
    await mapLimit([...byMachine.values()], MACHINES_AT_ONCE, async (moves) => {
      for (const move of moves) {
        const event: MachineStateChanged = {
          machineId: move.machineId,
          pool: move.pool,
          from: move.from,
          to: move.to,
          reason: move.reason,
          changedAt: move.changedAt.toISOString(),
        };
        try {
          await this.messaging.publish(MACHINE_STATE_CHANGED, event, { msgId: machineStateChangedMsgId(event) });
        } catch (e) {
          this.logger.warn({ machineId: move.machineId, err: (e as Error).message }, 'state change not announced yet; retrying');
          return;
        }
        countStateChange(move.from, move.to);
        published.push(move.id);
      }
    });
    return published;
  }
}
