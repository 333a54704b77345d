import { TERN_CONFIG } from '#tern/config';
import { type ClaimedMachine, MachineVerificationRepository } from '#tern/persistence';
import { newTestService } from '../../../../test/support/test-service.js';
import { Reconciler } from '../placement/reconciler.js';
import { MachineVerifier } from './machine-verifier.js';
import { ProofRounds } from './proof-rounds.js';

const HOUR = 3_600_000;
const h100 = { index: 0, model: 'NVIDIA H100 80GB HBM3', memoryBytes: 80 * 2 ** 30 };
const claimed = (over: Partial<ClaimedMachine> = {}): ClaimedMachine => ({
  id: 'm-1',
  pool: 'default',
  cpuModel: 'EPYC',
  cpuThreads: 16,
  gpus: [h100],
  verification: 'verified',
  checkedAt: new Date(Date.now() - HOUR),
  gpusInUse: 0,
  ...over,
});

async function verifier(machine: ClaimedMachine) {
  // One challenge interval of 6 h: a verified machine's busy GPUs are waited for up to 24 h.
  const { sut, fake } = await newTestService(MachineVerifier, [[TERN_CONFIG, { verification: { challengeIntervalSeconds: 6 * 3600 } }]]);
  const repository = fake(MachineVerificationRepository);
  repository.claimDue.mockResolvedValue([machine]);
  repository.record.mockResolvedValue(machine.verification);
  const rounds = fake(ProofRounds);
  rounds.prove.mockImplementation((_, claims) => Promise.resolve(claims.map(() => ({ kind: 'passed' as const, macsPerSecond: 1e12 }))));
  return { sut, repository, rounds, reconciler: fake(Reconciler) };
}

describe('MachineVerifier', () => {
  it('challenges every claimed device of a machine whose GPUs are free, and stores the verdict', async () => {
    const { sut, repository, rounds } = await verifier(claimed({ verification: 'unverified' }));
    await sut.pass();
    expect(rounds.prove.mock.calls.map(([, claims]) => claims.map((c) => c.device))).toEqual([['cpu'], ['gpu:0']]);
    expect(repository.record).toHaveBeenCalledWith(
      expect.objectContaining({ id: 'm-1' }),
      expect.objectContaining({ state: 'verified' }),
      expect.any(Number),
    );
    expect(repository.defer).not.toHaveBeenCalled();
  });

  it('puts off the challenge of a machine whose GPUs run work it placed, its state kept', async () => {
    for (const verification of ['verified', 'unverified', 'quarantined'] as const) {
      const { sut, repository, rounds } = await verifier(claimed({ verification, gpusInUse: 1 }));
      await sut.pass();
      expect(rounds.prove).not.toHaveBeenCalled();
      expect(repository.record).not.toHaveBeenCalled();
      expect(repository.defer).toHaveBeenCalledWith('m-1', 10 * 60_000);
    }
  });

  it('no longer counts a verified machine as proven once its GPUs stayed busy four intervals past its last challenge', async () => {
    const { sut, repository, rounds } = await verifier(claimed({ gpusInUse: 2, checkedAt: new Date(Date.now() - 25 * HOUR) }));
    await sut.pass();
    expect(rounds.prove).not.toHaveBeenCalled();
    expect(repository.defer).not.toHaveBeenCalled();
    expect(repository.record).toHaveBeenCalledWith(
      expect.objectContaining({ id: 'm-1' }),
      {
        state: 'unverified',
        reason: 'its GPUs have run work since its last challenge 25 h ago: verified again once a challenge finds them free',
      },
      10 * 60_000,
    );
  });

  it('challenges a machine with no GPUs whatever its containers do', async () => {
    const { sut, rounds, repository } = await verifier(claimed({ gpus: [], gpusInUse: 0, verification: 'unverified' }));
    await sut.pass();
    expect(rounds.prove.mock.calls.map(([, claims]) => claims.map((c) => c.device))).toEqual([['cpu']]);
    expect(repository.defer).not.toHaveBeenCalled();
  });

  it('challenges the CPU, then every GPU at once; the first device that fails decides', async () => {
    const gpus = [0, 1, 2].map((index) => ({ ...h100, index }));
    const { sut, repository, rounds } = await verifier(claimed({ gpus, verification: 'unverified' }));
    rounds.prove.mockImplementation((_, claims) =>
      Promise.resolve(
        claims.map((c) =>
          c.device === 'cpu' || c.device === 'gpu:0'
            ? { kind: 'passed' as const, macsPerSecond: 1e12 }
            : { kind: 'failed' as const, reason: `${c.device} late` },
        ),
      ),
    );
    await sut.pass();
    expect(rounds.prove.mock.calls.map(([, claims]) => claims.map((c) => c.device))).toEqual([['cpu'], ['gpu:0', 'gpu:1', 'gpu:2']]);
    expect(repository.record).toHaveBeenCalledWith(
      expect.objectContaining({ id: 'm-1' }),
      { state: 'quarantined', reason: 'gpu:1 late' },
      expect.any(Number),
    );
  });
});
