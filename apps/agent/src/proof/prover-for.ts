import type { GpuInventory } from '#tern/contracts';
import { ReplyError } from '#tern/messaging';
import { CpuProver } from './cpu-prover.js';
import type { Prover, ProverRequest } from './prover.js';

/** What proverFor() chooses from: the machine as discovery saw it, and how to start a GPU prover on it. */
export interface ProverChoices {
  /** The GPUs discovery saw (nvidia-smi for NVIDIA), as last registered. */
  gpus: readonly GpuInventory[];
  /** Starts a GPU prover on one of them, or says why this agent cannot (no runtime, no runners). */
  gpuProver: ((request: ProverRequest, gpu: GpuInventory) => Prover) | { unavailable: string };
  cpuProver?: (request: ProverRequest) => Prover;
}

/**
 * The prover for a challenge: the CPU's on the CPU; a GPU's in a container on that GPU (GpuProver)
 * when discovery saw an NVIDIA GPU of that index. Otherwise 501: the claim stays unproven and
 * the machine unverified, rather than quarantined for a device this agent has no way to show
 * (computed on the CPU, a GPU's challenge could only fail the GPU's band).
 */
export function proverFor(challenge: ProverRequest, choices: ProverChoices): Prover {
  if (challenge.device === 'cpu') return (choices.cpuProver ?? ((c) => new CpuProver(c)))(challenge);
  const index = Number(challenge.device.slice('gpu:'.length));
  const gpu = choices.gpus.find((g) => g.index === index);
  if (!gpu) throw new ReplyError(501, `discovery saw no GPU ${index} on this machine: nothing here can prove ${challenge.device}`);
  if (gpu.vendor !== 'nvidia')
    throw new ReplyError(501, `GPU ${index} is ${gpu.vendor}: this agent proves NVIDIA GPUs only (the claim stays unverified)`);
  if ('unavailable' in choices.gpuProver)
    throw new ReplyError(501, `this agent cannot prove ${challenge.device}: ${choices.gpuProver.unavailable}`);
  return choices.gpuProver(challenge, gpu);
}
