import { Inject, Injectable } from '@nestjs/common';
import { ReputationRepository, type StoredMachineRecord } from '#tern/persistence';
import { applyHeartbeat, type MachineRecord, machineRecordOf, recordHeartbeat, type ReputationParams } from '#tern/reputation';
import { REPUTATION_PARAMS } from './reputation-params.js';

/** Changes close together are written in one transaction. */
const FLUSH_DELAY_MS = 50;

/** A change to one machine's record: a heartbeat, or anything else as a function of the record. */
type Change = { beat: { sequence: number; arrival: number } } | { apply: (record: MachineRecord) => unknown };

interface Pending {
  pool?: string;
  changes: Change[];
}

/**
 * Applies events to the machines' records in `reputation_machines`, the only copy: every
 * replica of the service changes them, each under the rows' locks (read, change, write in one
 * transaction), so replicas sharing the consumers never lose each other's changes. An event
 * handler is acknowledged only once its change is stored; a redelivery after a crash either
 * finds the record without it or, if it was stored, is skipped by the record's own guards (the
 * list of events already counted, the heartbeat's sequence).
 *
 * A machine whose pending changes are only heartbeats is written without its document: the
 * heartbeats column alone (a few hundred bytes, where the whole record is tens of KB).
 */
@Injectable()
export class MachineBook {
  private pending = new Map<string, Pending>();
  private next?: Promise<void>;
  private chain: Promise<void> = Promise.resolve();

  constructor(
    private readonly reputation: ReputationRepository,
    @Inject(REPUTATION_PARAMS) private readonly params: ReputationParams,
  ) {}

  /** The machine's stored record, if it has one. */
  async read(machineId: string): Promise<MachineRecord | undefined> {
    const stored = await this.reputation.machineRecord(machineId);
    return stored && machineRecordOf(stored.machineId, stored.pool, stored.record, stored.heartbeats);
  }

  /** Applies `change` to the machine's record (created when new); resolves once it is stored. */
  update(machineId: string, pool: string | undefined, apply: (record: MachineRecord) => unknown): Promise<void> {
    return this.add(machineId, pool, { apply });
  }

  /** Counts a heartbeat that reached NATS at `arrival`; resolves once it is stored. */
  heartbeat(machineId: string, pool: string | undefined, sequence: number, arrival: number): Promise<void> {
    return this.add(machineId, pool, { beat: { sequence, arrival } });
  }

  private add(machineId: string, pool: string | undefined, change: Change): Promise<void> {
    let pending = this.pending.get(machineId);
    if (!pending) this.pending.set(machineId, (pending = { changes: [] }));
    if (pool) pending.pool = pool;
    pending.changes.push(change);
    return this.scheduleFlush();
  }

  private scheduleFlush(): Promise<void> {
    this.next ??= new Promise<void>((resolve) => setTimeout(resolve, FLUSH_DELAY_MS)).then(() => {
      this.next = undefined;
      const run = this.chain.catch(() => undefined).then(() => this.flush());
      this.chain = run;
      return run;
    });
    return this.next;
  }

  /**
   * Nothing of a failed flush is kept: the handlers waiting on it fail, and their messages are
   * redelivered and applied again.
   */
  private async flush(): Promise<void> {
    const batch = this.pending;
    this.pending = new Map();
    // Sorted, so two replicas lock the rows they share in the same order.
    const ids = [...batch.keys()].sort();
    if (!ids.length) return;
    const withRecord = ids.filter((id) => batch.get(id)!.changes.some((c) => 'apply' in c));
    await this.reputation.transaction(async (tx) => {
      const rows = await tx.lockMachineRecords(ids, withRecord);
      await tx.writeMachineRecords(rows.map((row) => this.applied(row, batch.get(row.machineId)!)));
    });
  }

  /** The stored record with the pending changes applied in order: the whole record, or its heartbeats alone. */
  private applied(row: StoredMachineRecord, pending: Pending): StoredMachineRecord {
    const pool = pending.pool ?? row.pool;
    if (!row.record) {
      let heartbeats = machineRecordOf(row.machineId, pool, undefined, row.heartbeats).heartbeats;
      for (const c of pending.changes)
        if ('beat' in c) heartbeats = recordHeartbeat(heartbeats, c.beat.sequence, c.beat.arrival, this.params);
      return { machineId: row.machineId, pool, heartbeats, hasTransitions: row.hasTransitions };
    }
    const record = machineRecordOf(row.machineId, pool, row.record, row.heartbeats);
    for (const c of pending.changes) {
      if ('beat' in c) applyHeartbeat(record, c.beat.sequence, c.beat.arrival, this.params);
      else c.apply(record);
    }
    const { heartbeats, ...document } = record;
    return { machineId: row.machineId, pool: record.pool, record: document, heartbeats, hasTransitions: record.transitions.length > 0 };
  }
}
