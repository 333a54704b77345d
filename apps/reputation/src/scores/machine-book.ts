import { Inject, Injectable, Logger, type OnModuleInit } from '@nestjs/common';
import { MACHINE_BEAT } from '#tern/contracts';
import { Messaging } from '#tern/messaging';
import { ReputationRepository, type StoredMachineRecord } from '#tern/persistence';
import {
  applyHeartbeat,
  type DeafSpan,
  heartbeatsOf,
  type MachineRecord,
  machineRecordOf,
  recordHeartbeat,
  type ReputationParams,
} from '#tern/reputation';
import { REPUTATION_PARAMS } from './reputation-params.js';

/** Changes close together are written in one transaction. */
const FLUSH_DELAY_MS = 50;

/**
 * A change to one machine's record: a heartbeat, or anything else as a function of the record.
 * `heard`: a core NATS beat, timed by its arrival here, so the times nobody heard are skipped.
 */
type Change = { beat: { sequence: number; arrival: number; heard: boolean } } | { apply: (record: MachineRecord) => unknown };

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
 *
 * Beats come on core NATS, stored nowhere: those sent while no replica listened are lost. So a
 * replica skips, in every gap it judges, the time from the newest beat stored when it started (the
 * service's last flush: another replica's moments ago, or its own before a crash) to when its
 * subscription was live, and the times it was cut from NATS since (recordHeartbeat's `deaf`).
 */
@Injectable()
export class MachineBook implements OnModuleInit {
  private readonly logger = new Logger('machine-book');
  private pending = new Map<string, Pending>();
  private next?: Promise<void>;
  private chain: Promise<void> = Promise.resolve();
  /** The newest beat stored when this replica started (epoch ms), if any. */
  private lastStoredAtStart: number | null = null;

  constructor(
    private readonly reputation: ReputationRepository,
    private readonly messaging: Messaging,
    @Inject(REPUTATION_PARAMS) private readonly params: ReputationParams,
  ) {}

  /** Before the transport subscribes (Nest starts microservices after the modules' init). */
  async onModuleInit() {
    this.lastStoredAtStart = await this.reputation.lastHeartbeatArrival();
    if (this.lastStoredAtStart !== null)
      this.logger.log(
        `the newest beat stored arrived ${new Date(this.lastStoredAtStart).toISOString()}: beats unheard since are not judged`,
      );
  }

  /** The spans no beat could reach this replica, as far as it knows; undefined before its subscription is live. */
  deafSpans(): readonly DeafSpan[] {
    const hearing = this.messaging.hearing(MACHINE_BEAT);
    const since = hearing.since;
    if (since === undefined) return [];
    const start: DeafSpan[] = this.lastStoredAtStart !== null && this.lastStoredAtStart < since ? [[this.lastStoredAtStart, since]] : [];
    return [...start, ...hearing.deafSpans];
  }

  /** The machine's stored record, if it has one. */
  async read(machineId: string): Promise<MachineRecord | undefined> {
    const stored = await this.reputation.machineRecord(machineId);
    return stored && machineRecordOf(stored.machineId, stored.pool, stored.record, stored.heartbeats);
  }

  /** Applies `change` to the machine's record (created when new); resolves once it is stored. */
  update(machineId: string, pool: string | undefined, apply: (record: MachineRecord) => unknown): Promise<void> {
    return this.add(machineId, pool, { apply });
  }

  /**
   * Counts a heartbeat that arrived at `arrival`: `heard` when this replica heard it on core NATS
   * (its deafness skipped), not when NATS stored it (a previous release's agent); resolves once it is stored.
   */
  heartbeat(machineId: string, pool: string | undefined, sequence: number, arrival: number, heard: boolean): Promise<void> {
    return this.add(machineId, pool, { beat: { sequence, arrival, heard } });
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
    const deaf = this.deafSpans();
    await this.reputation.transaction(async (tx) => {
      const rows = await tx.lockMachineRecords(ids, withRecord);
      await tx.writeMachineRecords(rows.map((row) => this.applied(row, batch.get(row.machineId)!, deaf)));
    });
  }

  /** The stored record with the pending changes applied in order: the whole record, or its heartbeats alone. */
  private applied(row: StoredMachineRecord, pending: Pending, deaf: readonly DeafSpan[]): StoredMachineRecord {
    const pool = pending.pool ?? row.pool;
    if (!row.record) {
      let heartbeats = heartbeatsOf(row.heartbeats);
      for (const c of pending.changes)
        if ('beat' in c) heartbeats = recordHeartbeat(heartbeats, c.beat.sequence, c.beat.arrival, this.params, c.beat.heard ? deaf : []);
      return { machineId: row.machineId, pool, heartbeats, hasTransitions: row.hasTransitions };
    }
    const record = machineRecordOf(row.machineId, pool, row.record, row.heartbeats);
    for (const c of pending.changes) {
      if ('beat' in c) applyHeartbeat(record, c.beat.sequence, c.beat.arrival, this.params, c.beat.heard ? deaf : []);
      else c.apply(record);
    }
    const { heartbeats, ...document } = record;
    return { machineId: row.machineId, pool: record.pool, record: document, heartbeats, hasTransitions: record.transitions.length > 0 };
  }
}
