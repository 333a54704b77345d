import { hashToken, type Machine, MachinesRepository } from '#tern/persistence';
import { newTestService } from '../../../../test/support/test-service.js';
import { MachineTokenRotationService } from './machine-token-rotation.service.js';

async function rotation() {
  const { sut, fake } = await newTestService(MachineTokenRotationService);
  return { sut, machines: fake(MachinesRepository) };
}

describe('MachineTokenRotationService', () => {
  it("stores only the new token's hash and answers the token once", async () => {
    const { sut, machines } = await rotation();
    machines.replaceCredential.mockResolvedValue(true);
    const { machineId, machineToken } = await sut.rotateByOperator('m1');
    expect(machineId).toBe('m1');
    expect(machines.replaceCredential).toHaveBeenCalledWith('m1', hashToken(machineToken));
  });

  it('answers 404 for an unknown machine and 409 for one that never registered', async () => {
    const { sut, machines } = await rotation();
    machines.replaceCredential.mockResolvedValue(false);
    await expect(sut.rotateByOperator('ghost')).rejects.toMatchObject({ status: 404, message: 'machine "ghost" not found' });
    machines.findById.mockResolvedValue({ id: 'fresh' } as Machine);
    await expect(sut.rotateByOperator('fresh')).rejects.toMatchObject({
      status: 409,
      message: expect.stringMatching(/has not registered yet/),
    });
  });

  it('replaces only the token the machine holds, once: a second rotation with it is 401', async () => {
    const { sut, machines } = await rotation();
    const machine = { id: 'm1', credentialHash: 'old-hash' } as Machine;
    machines.replaceCredential.mockResolvedValueOnce(true).mockResolvedValueOnce(false);
    const first = await sut.rotateOwn(machine);
    expect(machines.replaceCredential).toHaveBeenCalledWith('m1', hashToken(first.machineToken), 'old-hash');
    await expect(sut.rotateOwn(machine)).rejects.toMatchObject({
      status: 401,
      message: 'the machine token of "m1" was replaced meanwhile; this one no longer works',
    });
    await expect(sut.rotateOwn({ id: 'm2', credentialHash: null } as Machine)).rejects.toMatchObject({ status: 401 });
  });
});
