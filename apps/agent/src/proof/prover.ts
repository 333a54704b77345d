import type { HardwareAnswer, HardwareChallenge, HardwareProbe } from '#tern/contracts';

/**
 * What answers a hardware challenge on this machine (libs/proof): computes the seeded product on
 * the device the challenge names, commits to it, then answers the probe from the product it
 * kept. One Prover per challenge; `release()` frees what it holds (its product, its worker).
 *
 * The CPU prover (CpuProver) is the only one today: the agent declines a GPU challenge (501),
 * so a GPU claim stays unproven and the machine unverified (it runs only what asks for no
 * verified machine) rather than quarantined for a GPU it has no way to show. A CUDA prover (a Tern container started on the claimed GPU, running the same int8
 * product with PyTorch) is another implementation of this interface, chosen by proverFor().
 */
export interface Prover {
  /** The Merkle root over C's rows, hex. */
  commit(): Promise<string>;
  answer(probe: HardwareProbe): Promise<HardwareAnswer>;
  release(): Promise<void>;
}

export type ProverFactory = (challenge: HardwareChallenge) => Prover;
