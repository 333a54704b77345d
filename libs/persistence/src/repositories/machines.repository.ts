import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import type { MachineState } from '#tern/contracts';
import { Machine } from '../entities/machine.entity.js';
import { Pool } from '../entities/pool.entity.js';

/** A pool's admission rules, as created or changed by an admin. */
export type PoolRules = Pick<Pool, 'name' | 'allowedGpuTypes' | 'minNetworkMbps' | 'minReputation'>;

/** How many machines of a pool are in one state. */
export interface PoolMachineCount {
  pool: string;
  state: MachineState;
  count: number;
}

/** Every statement on machines and pools (registration, credentials, state, offers). */
@Injectable()
export class MachinesRepository {
  constructor(private readonly db: DataSource) {}

  /** Every pool, by name. */
  listPools(): Promise<Pool[]> {
    return this.db.getRepository(Pool).find({ order: { name: 'ASC' } });
  }

  findPool(name: string): Promise<Pool | null> {
    return this.db.getRepository(Pool).findOneBy({ name });
  }

  /** Rejects a taken name with the unique violation uq_pools_name. */
  createPool(rules: PoolRules): Promise<Pool> {
    const pools = this.db.getRepository(Pool);
    return pools.save(pools.create(rules));
  }

  /** Writes a pool's changed rules. */
  savePool(pool: Pool): Promise<Pool> {
    return this.db.getRepository(Pool).save(pool);
  }

  /** Machines per pool and state (one pool's, or every pool's). */
  countMachinesByPoolAndState(pool?: string): Promise<PoolMachineCount[]> {
    const query = this.db
      .getRepository(Machine)
      .createQueryBuilder('m')
      .select('m.pool', 'pool')
      .addSelect('m.state', 'state')
      .addSelect('count(*)::int', 'count')
      .groupBy('m.pool')
      .addGroupBy('m.state');
    if (pool) query.where('m.pool = :pool', { pool });
    return query.getRawMany<PoolMachineCount>();
  }

  /** Every machine's pool and GPUs: what the cluster could ever offer a deployment. */
  gpuOffers(): Promise<Pick<Machine, 'pool' | 'gpus'>[]> {
    return this.db.getRepository(Machine).find({ select: { pool: true, gpus: true } });
  }
}
