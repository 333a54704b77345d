import type { HardwareAnswer, HardwareChallenge, HardwareProbe } from '#tern/contracts';

/**
 * What answers a hardware challenge on this machine (libs/proof): computes the seeded product on
 * the device the challenge names, commits to it, then answers the probe from the product it
 * kept. One Prover per challenge; `release()` frees what it holds (its product, its worker).
 *
 * CpuProver proves the CPU in a worker thread; GpuProver proves an NVIDIA GPU from a Tern
 * container on it (runners/python/tern_prover.py with PyTorch). proverFor() picks one, or declines
 * (501) a device discovery did not see: that claim stays unproven and the machine unverified
 * rather than quarantined for a device the agent has no way to show.
 */
export interface Prover {
  /** The Merkle root over C's rows, hex. */
  commit(): Promise<string>;
  answer(probe: HardwareProbe): Promise<HardwareAnswer>;
  release(): Promise<void>;
}

export type ProverFactory = (challenge: HardwareChallenge) => Prover;
