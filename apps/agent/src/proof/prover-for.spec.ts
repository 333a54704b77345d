import type { GpuInventory } from '#tern/contracts';
import type { Prover, ProverRequest } from './prover.js';
import { proverFor, type ProverChoices } from './prover-for.js';

const H100: GpuInventory = { index: 0, vendor: 'nvidia', model: 'NVIDIA H100 80GB HBM3', memoryMiB: 81_559, driverVersion: '580.159.04' };
const made: string[] = [];
const stub = (name: string): Prover => {
  made.push(name);
  return {
    prepare: () => Promise.resolve({}),
    commit: () => Promise.resolve(''),
    answer: () => Promise.reject(new Error('unused')),
    release: () => Promise.resolve(),
  };
};
const choices = (over: Partial<ProverChoices> = {}): ProverChoices => ({
  gpus: [H100],
  gpuProver: (c, gpu) => stub(`gpu ${gpu.index} for ${c.challengeId}`),
  cpuProver: (c) => stub(`cpu for ${c.challengeId}`),
  ...over,
});
const challenge = (device: string): ProverRequest => ({ challengeId: 'c-1', device, n: 64 });

describe('proverFor', () => {
  beforeEach(() => (made.length = 0));

  it('proves the CPU on the CPU and a GPU discovery saw in a GPU prover on it', () => {
    proverFor(challenge('cpu'), choices());
    proverFor(challenge('gpu:0'), choices());
    expect(made).toEqual(['cpu for c-1', 'gpu 0 for c-1']);
  });

  it('declines (501) a GPU discovery did not see: a claim of 8 GPUs on a machine with 1 stays unproven', () => {
    for (const device of ['gpu:1', 'gpu:7'])
      expect(() => proverFor(challenge(device), choices())).toThrow(
        expect.objectContaining({ code: 501, message: expect.stringMatching(/discovery saw no GPU/) }),
      );
    expect(made).toEqual([]);
  });

  it('declines (501) a GPU it has no prover for, saying why', () => {
    const amd = { ...H100, vendor: 'amd' as const, model: 'AMD Instinct MI300X' };
    expect(() => proverFor(challenge('gpu:0'), choices({ gpus: [amd] }))).toThrow(
      expect.objectContaining({ code: 501, message: expect.stringMatching(/NVIDIA GPUs only/) }),
    );
    expect(() => proverFor(challenge('gpu:0'), choices({ gpuProver: { unavailable: 'no container runtime (runc missing)' } }))).toThrow(
      expect.objectContaining({ code: 501, message: expect.stringMatching(/runc missing/) }),
    );
  });
});
