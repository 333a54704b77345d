import { randomUUID } from 'node:crypto';
import type { DataSource } from 'typeorm';
import { DEFAULT_POOL, isUniqueViolation, Machine, MachinesRepository } from '#tern/persistence';
import { migratedDatabase } from '../support/database.js';

const database = migratedDatabase('poolsrepo');
let db: DataSource;
let machines: MachinesRepository;

beforeAll(async () => {
  db = database.db;
  machines = new MachinesRepository(db);
});

const rules = (name: string) => ({ name, allowedGpuTypes: ['H100'], minNetworkMbps: 100, minReputation: null });

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error('expected the promise to reject');
}

describe('MachinesRepository: pools', () => {
  it('creates, finds, lists by name and changes pools, refusing a taken name', async () => {
    const b = await machines.createPool(rules('b-gpu'));
    expect(b).toMatchObject({
      id: expect.any(String),
      name: 'b-gpu',
      allowedGpuTypes: ['H100'],
      minNetworkMbps: 100,
      minReputation: null,
      createdAt: expect.any(Date),
    });
    await machines.createPool(rules('a-cpu'));
    expect((await machines.listPools()).map((p) => p.name)).toEqual(['a-cpu', 'b-gpu', DEFAULT_POOL]);
    expect(isUniqueViolation(await rejection(machines.createPool(rules('b-gpu'))), 'uq_pools_name')).toBe(true);

    const found = await machines.findPool('b-gpu');
    found!.minReputation = 0.5;
    found!.allowedGpuTypes = [];
    await machines.savePool(found!);
    expect(await machines.findPool('b-gpu')).toMatchObject({ minReputation: 0.5, allowedGpuTypes: [], minNetworkMbps: 100 });
    expect(await machines.findPool('nope')).toBeNull();
  });

  it('counts machines per pool and state, for one pool or all', async () => {
    await machines.createPool(rules('counted'));
    const machine = (pool: string, state: Machine['state']) => db.getRepository(Machine).save({ id: `m-${randomUUID()}`, pool, state });
    await machine('counted', 'ready');
    await machine('counted', 'ready');
    await machine('counted', 'offline');
    await machine(DEFAULT_POOL, 'ready');
    expect((await machines.countMachinesByPoolAndState('counted')).sort((x, y) => x.state.localeCompare(y.state))).toEqual([
      { pool: 'counted', state: 'offline', count: 1 },
      { pool: 'counted', state: 'ready', count: 2 },
    ]);
    expect(await machines.countMachinesByPoolAndState()).toContainEqual({ pool: DEFAULT_POOL, state: 'ready', count: 1 });
    expect(await machines.countMachinesByPoolAndState('empty')).toEqual([]);
  });

  it('answers every machine pool and GPUs', async () => {
    await machines.createPool(rules('offers'));
    await db.getRepository(Machine).save({ id: 'm-gpu', pool: 'offers', gpus: [{ model: 'H100' }] as Machine['gpus'] });
    expect(await machines.gpuOffers()).toContainEqual(expect.objectContaining({ pool: 'offers', gpus: [{ model: 'H100' }] }));
  });
});
