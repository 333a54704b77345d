import { Injectable } from '@nestjs/common';
import { MACHINE_FAULT, type MachineFault } from '#tern/contracts';
import { Messaging } from '#tern/messaging';
import { type MachineFaultEntry, MachineFaultsRepository } from '#tern/persistence';
import { mapLimit } from '#tern/timing';
import { OutboxRelay } from './outbox-relay.js';

/** Outbox rows read per round. */
const ROUND = 200;
/** Faults published at once. */
const AT_ONCE = 32;

/**
 * Announces the faults the scheduler saw on machines (`machine_fault_outbox`, written in the
 * statement that failed each container) as `machine.fault`, which reputation counts. A scheduler
 * killed between the commit and the publish leaves the row for the next round, here or in another
 * replica; one killed after publishing and before deleting publishes the same Nats-Msg-Id again,
 * which JetStream's duplicate window drops (and reputation counts one outcome per container
 * anyway). Poked after each statement that wrote a fault; a ticker catches the rest.
 */
@Injectable()
export class MachineFaultRelay extends OutboxRelay {
  constructor(
    private readonly faults: MachineFaultsRepository,
    private readonly messaging: Messaging,
  ) {
    super('machine fault relay', ROUND);
  }

  /** Each fault stands alone: replicas share the outbox row by row, in no particular order. */
  protected round(limit: number) {
    return this.faults.transaction(async (tx) => {
      const entries = await tx.claim(limit);
      const published = (await mapLimit(entries, AT_ONCE, (e) => this.publish(e))).filter((id) => id !== undefined);
      await tx.remove(published);
      return { read: entries.length, published: published.length };
    });
  }

  /** The row's id once published; undefined when it is left for the next round. */
  private async publish(e: MachineFaultEntry): Promise<string | undefined> {
    const fault: MachineFault = {
      machineId: e.machineId,
      kind: e.kind,
      containerId: e.containerId,
      deploymentId: e.deploymentId,
      deploymentVersion: e.deploymentVersion,
      workspaceId: e.workspaceId,
      afterReady: e.afterReady,
      reason: e.reason,
      at: e.at.toISOString(),
    };
    try {
      await this.messaging.publish(MACHINE_FAULT, fault, { msgId: `${e.containerId}:fault:${e.kind}` });
      return e.id;
    } catch (err) {
      this.logger.warn(
        { machineId: e.machineId, containerId: e.containerId, err: (err as Error).message },
        'fault not announced yet; retrying',
      );
      return undefined;
    }
  }
}
