import { QueryFailedError } from 'typeorm';
import { TERN_CONFIG } from '#tern/config';
import { hashToken, type Machine, MachinesRepository } from '#tern/persistence';
import { newTestService } from '../../../../test/support/test-service.js';
import type { Principal } from '../auth/principal.js';
import { MachineNatsUsers } from '../machine-registration/machine-nats-users.js';
import { PoolsService } from '../pools/pools.service.js';
import { HeartbeatSnapshotReader } from './heartbeat-snapshot-reader.js';
import { MachinesService } from './machines.service.js';
import { ReputationReader } from './reputation-reader.js';

const operator: Principal = { workspaceId: 'w0', workspaceName: 'default', tokenId: 'op', role: 'operator' };
const member: Principal = { workspaceId: 'w1', workspaceName: 'team', tokenId: 't1', role: 'member' };
const machine = (id: string) =>
  ({
    id,
    pool: 'default',
    state: 'ready',
    stateChangedAt: new Date(0),
    gpus: [],
    network: { interfaces: [{ name: 'eth0', addresses: ['10.0.0.5'] }] },
    lastHeartbeatAt: null,
    createdAt: new Date(0),
    updatedAt: new Date(0),
  }) as unknown as Machine;

async function machinesService(gatewayPublicUrl?: string) {
  const { sut, fake } = await newTestService(MachinesService, [
    [TERN_CONFIG, { machines: { joinTokenTtlSeconds: 600, gatewayPublicUrl } }],
  ]);
  const machines = fake(MachinesRepository);
  machines.findById.mockImplementation(async (id) => (['m1', 'm2'].includes(id) ? machine(id) : null));
  machines.list.mockResolvedValue([machine('m1'), machine('m2')]);
  machines.idsUsedByWorkspace.mockResolvedValue(['m1']);
  fake(HeartbeatSnapshotReader).getMany.mockResolvedValue(new Map());
  const reputation = fake(ReputationReader);
  reputation.current.mockResolvedValue(new Map());
  reputation.history.mockResolvedValue([]);
  return { sut, machines, pools: fake(PoolsService), natsUsers: fake(MachineNatsUsers), snapshots: fake(HeartbeatSnapshotReader) };
}

describe('MachinesService.create', () => {
  it('stores only the join token hash and answers the init line naming the public URL', async () => {
    const { sut, machines, pools } = await machinesService('https://tern.example');
    const created = await sut.create('h100-eu', 'box-1', 'http://10.0.0.1:8080');
    expect(pools.require).toHaveBeenCalledWith('h100-eu');
    expect(machines.createPending).toHaveBeenCalledWith(
      expect.objectContaining({ id: 'box-1', pool: 'h100-eu', joinTokenHash: hashToken(created.joinToken) }),
    );
    expect(created.command).toBe(`tern-agent init --gateway https://tern.example --token ${created.joinToken} --pool h100-eu`);
  });

  it('answers 409 for a taken machine id', async () => {
    const { sut, machines } = await machinesService();
    machines.createPending.mockRejectedValue(
      new QueryFailedError('INSERT', [], Object.assign(new Error('dup'), { code: '23505', constraint: 'pk_machines' })),
    );
    await expect(sut.create('default', 'box-1', 'http://gw')).rejects.toMatchObject({
      status: 409,
      message: expect.stringMatching(/^machine "box-1" already exists; remove it first/),
    });
  });
});

describe('MachinesService reads by a workspace token', () => {
  it('lists only the machines its work ran on', async () => {
    const { sut } = await machinesService();
    expect((await sut.list(member)).map((m) => m.id)).toEqual(['m1']);
    expect((await sut.list(operator)).map((m) => m.id)).toEqual(['m1', 'm2']);
  });

  it("answers 404 for a machine its work never ran on, and hides its owner's network interfaces", async () => {
    const { sut } = await machinesService();
    await expect(sut.get(member, 'm2')).rejects.toMatchObject({ status: 404, message: 'machine "m2" not found' });
    await expect(sut.reputationOf(member, 'm2', undefined, 10)).rejects.toMatchObject({ status: 404 });
    await expect(sut.stateChangesOf(member, 'm2', undefined, 10)).rejects.toMatchObject({ status: 404 });
    expect((await sut.get(member, 'm1')).networkInterfaces).toEqual([]);
    expect((await sut.get(operator, 'm1')).networkInterfaces).toEqual([{ name: 'eth0', addresses: ['10.0.0.5'] }]);
  });
});

describe('MachinesService.remove and revoke', () => {
  it('forgets the machine and revokes its NATS user; 404 for an unknown one', async () => {
    const { sut, machines, natsUsers, snapshots } = await machinesService();
    machines.findById.mockResolvedValue({ ...machine('m1'), natsPublicKey: 'UKEY' } as Machine);
    machines.remove.mockResolvedValue(true);
    await sut.remove('m1');
    expect(snapshots.remove).toHaveBeenCalledWith('m1');
    expect(natsUsers.revoke).toHaveBeenCalledWith('m1', 'UKEY', 'the machine was deleted');
    machines.remove.mockResolvedValue(false);
    await expect(sut.remove('ghost')).rejects.toMatchObject({ status: 404 });
    expect(natsUsers.revoke).toHaveBeenCalledTimes(1);
  });

  it('cuts a machine off by its credential, revoking a NATS user only when it has one', async () => {
    const { sut, machines, natsUsers } = await machinesService();
    machines.revokeCredential.mockResolvedValueOnce('UKEY').mockResolvedValueOnce(null).mockResolvedValueOnce(undefined);
    await sut.revoke('m1');
    expect(natsUsers.revoke).toHaveBeenCalledWith('m1', 'UKEY', 'an operator revoked the machine');
    await sut.revoke('m2');
    expect(natsUsers.revoke).toHaveBeenCalledTimes(1);
    await expect(sut.revoke('ghost')).rejects.toMatchObject({ status: 404, message: 'machine "ghost" not found' });
  });
});
