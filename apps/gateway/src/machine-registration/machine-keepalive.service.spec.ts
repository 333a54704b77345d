import { MACHINE_BEAT } from '#tern/contracts';
import { Messaging } from '#tern/messaging';
import type { Machine } from '#tern/persistence';
import { newTestService } from '../../../../test/support/test-service.js';
import { MachineKeepaliveService } from './machine-keepalive.service.js';

const GIB = 2 ** 30;
const machine = {
  id: 'm-1',
  pool: 'default',
  gpus: [0, 1, 2].map((index) => ({ index, model: 'NVIDIA A10', memoryBytes: 24 * GIB })),
} as unknown as Machine;

async function keepalives() {
  const { sut, fake } = await newTestService(MachineKeepaliveService);
  return { sut, messaging: fake(Messaging) };
}

describe('MachineKeepaliveService.keepalive', () => {
  it("turns a keepalive into a heartbeat on the machine's subject: free GPUs first, load kept within 0-100 %", async () => {
    const { sut, messaging } = await keepalives();
    await expect(
      sut.keepalive(machine, {
        machineId: 'm-1',
        metrics: { freeGpuCount: 2, cpuUtilizationPct: 140, memoryUtilizationPct: -3 },
        agentVersion: '1.2.3',
      } as never),
    ).resolves.toEqual({ ok: true });
    expect(messaging.emit).toHaveBeenCalledWith(
      MACHINE_BEAT,
      expect.objectContaining({
        machineId: 'm-1',
        pool: 'default',
        cpuPercent: 100,
        memoryPercent: 0,
        runningContainers: [],
        agentVersion: '1.2.3',
        gpus: [
          { index: 0, model: 'NVIDIA A10', memoryMiB: 24576, state: 'free' },
          { index: 1, model: 'NVIDIA A10', memoryMiB: 24576, state: 'free' },
          { index: 2, model: 'NVIDIA A10', memoryMiB: 24576, state: 'busy' },
        ],
      }),
      ['m-1'],
    );
  });

  it('counts every GPU free when the keepalive does not say', async () => {
    const { sut, messaging } = await keepalives();
    await sut.keepalive(machine, { machineId: 'm-1' } as never);
    const beat = messaging.emit.mock.calls[0][1] as { gpus: { state: string }[] };
    expect(beat.gpus.map((g) => g.state)).toEqual(['free', 'free', 'free']);
  });

  it("refuses with a 409 a keepalive for another machine than the token's, or another pool, publishing nothing", async () => {
    const { sut, messaging } = await keepalives();
    await expect(sut.keepalive(machine, { machineId: 'm-2' } as never)).rejects.toMatchObject({
      status: 409,
      message: 'this machine token belongs to machine "m-1", not "m-2"',
    });
    await expect(sut.keepalive(machine, { machineId: 'm-1', poolName: 'gpu' } as never)).rejects.toMatchObject({
      status: 409,
      message: 'pool mismatch: machine "m-1" is in pool "default", not "gpu"',
    });
    expect(messaging.emit).not.toHaveBeenCalled();
  });

  it('answers 503 when NATS does not take the heartbeat, so the agent tries again', async () => {
    const { sut, messaging } = await keepalives();
    messaging.emit.mockImplementation(() => {
      throw new Error('connection closed');
    });
    await expect(sut.keepalive(machine, { machineId: 'm-1' } as never)).rejects.toMatchObject({
      status: 503,
      message: expect.stringMatching(/^cannot record the keepalive on NATS \(connection closed\)/),
    });
  });
});
