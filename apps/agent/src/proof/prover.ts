import type { HardwareAnswer, HardwareProbe, HardwareProverPrepare } from '#tern/contracts';

/**
 * What answers a hardware challenge on this machine (libs/proof): gets ready on the device the
 * challenge names before the seed is known (untimed), computes the seeded product there, commits
 * to it, then answers the probe from the product it kept. One Prover per challenge; `release()`
 * frees what it holds (its product, its worker, its container).
 *
 * CpuProver proves the CPU in a worker thread; GpuProver proves an NVIDIA GPU from a Tern
 * container on it (runners/python/tern_prover.py with PyTorch). proverFor() picks one, or declines
 * (501) a device discovery did not see: that claim stays unproven and the machine unverified
 * rather than quarantined for a device the agent has no way to show.
 */
export interface Prover {
  /** Everything that does not need the seed; resolves with the device memory it allocated, where some was claimed. */
  prepare(): Promise<ProverReady>;
  /** The Merkle root over C's rows, hex. */
  commit(seed: string): Promise<string>;
  answer(probe: HardwareProbe): Promise<HardwareAnswer>;
  release(): Promise<void>;
}

export interface ProverReady {
  allocatedBytes?: number;
}

/** What a prover is made for: the prepare step's request, without its deadline. */
export type ProverRequest = Pick<HardwareProverPrepare, 'challengeId' | 'device' | 'n' | 'claimedMemoryBytes'>;

export type ProverFactory = (request: ProverRequest) => Prover;
