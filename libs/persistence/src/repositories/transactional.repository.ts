import type { DataSource, EntityManager } from 'typeorm';
import { queryRows, queryRowsOn } from '../query-rows.js';

/**
 * The base of a repository whose statements a caller may need in one transaction (a row lock
 * held while an event is published, a claim and its outcome): `transaction(work)` hands `work`
 * a copy of the repository whose every statement runs in that transaction, which commits when
 * `work` resolves and rolls back when it throws.
 */
export abstract class TransactionalRepository {
  /** Set on the copy transaction() hands its work. */
  protected manager?: EntityManager;

  constructor(protected readonly db: DataSource) {}

  transaction<T>(work: (tx: this) => Promise<T>): Promise<T> {
    return this.db.transaction((manager) => {
      const tx = Object.create(this) as this;
      tx.manager = manager;
      return work(tx);
    });
  }

  /** Another repository whose statements run in this one's transaction (when this is transaction()'s copy). */
  joining<R extends TransactionalRepository>(other: R): R {
    if (!this.manager) return other;
    const tx = Object.create(other) as R;
    tx.manager = this.manager;
    return tx;
  }

  /** Rows of a statement, in the transaction when this is transaction()'s copy. */
  protected rows<T>(sql: string, parameters: unknown[] = []): Promise<T[]> {
    return this.manager ? queryRows<T>(this.manager.queryRunner!, sql, parameters) : queryRowsOn<T>(this.db, sql, parameters);
  }
}
