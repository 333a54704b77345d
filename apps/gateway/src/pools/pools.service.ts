import { ConflictException, Injectable, NotFoundException } from '@nestjs/common';
import { type MachineState } from '#tern/contracts';
import { isForeignKeyViolation, isUniqueViolation, MachinesRepository, type Pool } from '#tern/persistence';
import { type CreatePoolDto } from './dto/create-pool.dto.js';
import { type UpdatePoolDto } from './dto/update-pool.dto.js';

export interface PoolView {
  name: string;
  allowedGpuTypes: string[];
  minNetworkMbps: number | null;
  minReputation: number | null;
  createdAt: Date;
  /** Machines in the pool, in all and by state. */
  machines: { total: number; byState: Partial<Record<MachineState, number>> };
}

type Counts = Map<string, PoolView['machines']>;

function view(pool: Pool, counts: Counts): PoolView {
  return {
    name: pool.name,
    allowedGpuTypes: pool.allowedGpuTypes,
    minNetworkMbps: pool.minNetworkMbps,
    minReputation: pool.minReputation,
    createdAt: pool.createdAt,
    machines: counts.get(pool.name) ?? { total: 0, byState: {} },
  };
}

@Injectable()
export class PoolsService {
  constructor(private readonly machines: MachinesRepository) {}

  async list(): Promise<PoolView[]> {
    const [pools, counts] = await Promise.all([this.machines.listPools(), this.counts()]);
    return pools.map((p) => view(p, counts));
  }

  async get(name: string): Promise<PoolView> {
    const pool = await this.require(name);
    return view(pool, await this.counts(name));
  }

  /** The pool row, or 404 naming it. */
  async require(name: string): Promise<Pool> {
    const pool = await this.machines.findPool(name);
    if (!pool) throw new NotFoundException(`pool "${name}" not found; see tern pool list`);
    return pool;
  }

  async create(dto: CreatePoolDto): Promise<PoolView> {
    try {
      const pool = await this.machines.createPool({
        name: dto.name,
        allowedGpuTypes: dto.allowedGpuTypes ?? [],
        minNetworkMbps: dto.minNetworkMbps ?? null,
        minReputation: dto.minReputation ?? null,
      });
      return view(pool, new Map());
    } catch (e) {
      if (isUniqueViolation(e, 'uq_pools_name')) throw new ConflictException(`pool "${dto.name}" already exists`);
      throw e;
    }
  }

  /** Machines already in the pool are judged against the new rules on their next heartbeat. */
  async update(name: string, dto: UpdatePoolDto): Promise<PoolView> {
    const pool = await this.require(name);
    if (dto.allowedGpuTypes !== undefined) pool.allowedGpuTypes = dto.allowedGpuTypes ?? [];
    if (dto.minNetworkMbps !== undefined) pool.minNetworkMbps = dto.minNetworkMbps;
    if (dto.minReputation !== undefined) pool.minReputation = dto.minReputation;
    await this.machines.savePool(pool);
    return this.get(name);
  }

  /**
   * Deletes a pool nothing names any more; a 409 says what still does and how to free it. The
   * default pool stays: agents join it when they name none.
   */
  async remove(name: string): Promise<void> {
    await this.require(name);
    if (name === 'default') throw new ConflictException('pool "default" is where agents join when they name no pool: it cannot be deleted');
    const users = await this.machines.poolUsers(name);
    const held = [
      users.machines ? `${users.machines} machine(s) (tern machine list --pool ${name}, then tern machine delete <id>)` : '',
      users.deployments.length ? `deployment(s) ${users.deployments.join(', ')} (deploy them to another pool or delete them)` : '',
      users.sandboxes ? `${users.sandboxes} live sandbox(es) (tern sandbox list, then tern sandbox rm <id>)` : '',
    ].filter(Boolean);
    if (held.length) throw new ConflictException(`pool "${name}" is still used by ${held.join('; ')}`);
    try {
      await this.machines.deletePool(name);
    } catch (e) {
      if (isForeignKeyViolation(e, 'fk_machines_pool'))
        throw new ConflictException(`pool "${name}": a machine joined it meanwhile; try again`);
      throw e;
    }
  }

  private async counts(pool?: string): Promise<Counts> {
    const rows = await this.machines.countMachinesByPoolAndState(pool);
    const counts: Counts = new Map();
    for (const r of rows) {
      const c = counts.get(r.pool) ?? { total: 0, byState: {} };
      c.total += r.count;
      c.byState[r.state] = r.count;
      counts.set(r.pool, c);
    }
    return counts;
  }
}
