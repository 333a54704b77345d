import { QueryFailedError } from 'typeorm';
import { MachinesRepository, type Pool } from '#tern/persistence';
import { newTestService } from '../../../../test/support/test-service.js';
import { PoolsService } from './pools.service.js';

const pool = (name: string) =>
  ({ name, allowedGpuTypes: [], minNetworkMbps: null, minReputation: null, createdAt: new Date(0) }) as unknown as Pool;
const violation = (code: string, constraint: string) =>
  new QueryFailedError('INSERT', [], Object.assign(new Error(constraint), { code, constraint }));
const unused = { machines: 0, deployments: [] as string[], sandboxes: 0 };

async function pools() {
  const { sut, fake } = await newTestService(PoolsService);
  const machines = fake(MachinesRepository);
  machines.findPool.mockImplementation(async (name) => (['default', 'h100-eu'].includes(name) ? pool(name) : null));
  machines.countMachinesByPoolAndState.mockResolvedValue([]);
  machines.poolUsers.mockResolvedValue(unused);
  return { sut, machines };
}

describe('PoolsService', () => {
  it('counts the machines of each pool by state', async () => {
    const { sut, machines } = await pools();
    machines.listPools.mockResolvedValue([pool('default'), pool('h100-eu')]);
    machines.countMachinesByPoolAndState.mockResolvedValue([
      { pool: 'h100-eu', state: 'ready', count: 3 },
      { pool: 'h100-eu', state: 'offline', count: 1 },
    ] as never);
    const [plain, eu] = await sut.list();
    expect(plain!.machines).toEqual({ total: 0, byState: {} });
    expect(eu!.machines).toEqual({ total: 4, byState: { ready: 3, offline: 1 } });
  });

  it('answers 404 naming the list command for an unknown pool, and 409 for a taken name', async () => {
    const { sut, machines } = await pools();
    await expect(sut.get('nope')).rejects.toMatchObject({ status: 404, message: 'pool "nope" not found; see tern pool list' });
    machines.createPool.mockRejectedValue(violation('23505', 'uq_pools_name'));
    await expect(sut.create({ name: 'h100-eu' })).rejects.toMatchObject({ status: 409, message: 'pool "h100-eu" already exists' });
  });

  it('changes only the rules an update names; null clears one', async () => {
    const { sut, machines } = await pools();
    const stored = { ...pool('h100-eu'), minNetworkMbps: 500, minReputation: 0.9 };
    machines.findPool.mockResolvedValue(stored);
    await sut.update('h100-eu', { minReputation: null, allowedGpuTypes: ['H100'] } as never);
    expect(machines.savePool).toHaveBeenCalledWith(
      expect.objectContaining({ minNetworkMbps: 500, minReputation: null, allowedGpuTypes: ['H100'] }),
    );
  });

  it('refuses to delete the default pool, and one still used, saying by what and how to free it', async () => {
    const { sut, machines } = await pools();
    await expect(sut.remove('default')).rejects.toMatchObject({ status: 409, message: expect.stringMatching(/it cannot be deleted$/) });
    machines.poolUsers.mockResolvedValue({ machines: 2, deployments: ['api', 'queue'], sandboxes: 1 });
    await expect(sut.remove('h100-eu')).rejects.toMatchObject({
      status: 409,
      message:
        'pool "h100-eu" is still used by 2 machine(s) (tern machine list --pool h100-eu, then tern machine delete <id>); deployment(s) api, queue (deploy them to another pool or delete them); 1 live sandbox(es) (tern sandbox list, then tern sandbox rm <id>)',
    });
    expect(machines.deletePool).not.toHaveBeenCalled();
  });

  it('deletes an unused pool, and answers 409 when a machine joined it meanwhile', async () => {
    const { sut, machines } = await pools();
    await sut.remove('h100-eu');
    expect(machines.deletePool).toHaveBeenCalledWith('h100-eu');
    machines.deletePool.mockRejectedValue(violation('23503', 'fk_machines_pool'));
    await expect(sut.remove('h100-eu')).rejects.toMatchObject({
      status: 409,
      message: 'pool "h100-eu": a machine joined it meanwhile; try again',
    });
  });
});
