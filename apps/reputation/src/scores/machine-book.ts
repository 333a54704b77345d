import { Injectable, Logger, type OnModuleInit } from '@nestjs/common';
import { ReputationRepository } from '#tern/persistence';
import { type MachineRecord, newMachineRecord } from '#tern/reputation';

/** Changes close together are written in one statement. */
const FLUSH_DELAY_MS = 50;

/**
 * Every machine's MachineRecord, in memory for scoring and in `reputation_machines` so a
 * restart resumes where it stopped. An event handler changes a record through update() and is
 * acknowledged only once the change is stored; a redelivery after a crash finds the record
 * without it (memory starts from the table) or, if it was stored, is skipped by the record's
 * list of events already counted.
 *
 * One replica: the records are the service's working memory. A second replica would split the
 * events between two diverging copies.
 */
@Injectable()
export class MachineBook implements OnModuleInit {
  private readonly logger = new Logger('machine-book');
  private readonly records = new Map<string, MachineRecord>();
  private readonly dirty = new Set<string>();
  private next?: Promise<void>;
  private chain: Promise<void> = Promise.resolve();

  constructor(private readonly reputation: ReputationRepository) {}

  async onModuleInit() {
    const rows = await this.reputation.machineRecords();
    for (const row of rows)
      this.records.set(row.machineId, { ...newMachineRecord(row.machineId), ...(row.record as Partial<MachineRecord>) });
    this.logger.log(`resumed the records of ${rows.length} machine(s)`);
  }

  all(): MachineRecord[] {
    return [...this.records.values()];
  }

  get(machineId: string): MachineRecord | undefined {
    return this.records.get(machineId);
  }

  /** Applies `change` to the machine's record (created when new); resolves once it is stored. */
  update(machineId: string, pool: string | undefined, change: (record: MachineRecord) => unknown): Promise<void> {
    let record = this.records.get(machineId);
    if (!record) {
      record = newMachineRecord(machineId, pool ?? null);
      this.records.set(machineId, record);
    }
    if (pool) record.pool = pool;
    change(record);
    this.dirty.add(machineId);
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

  private async flush(): Promise<void> {
    const ids = [...this.dirty];
    this.dirty.clear();
    const rows = ids.flatMap((id) => {
      const r = this.records.get(id);
      return r ? [{ machineId: id, pool: r.pool, record: r }] : [];
    });
    if (!rows.length) return;
    try {
      await this.reputation.saveMachineRecords(rows);
    } catch (e) {
      // Written with the next flush; the events wait unacknowledged until then.
      ids.forEach((id) => this.dirty.add(id));
      throw e;
    }
  }
}
