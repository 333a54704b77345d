import { Type } from 'class-transformer';
import { ArrayMaxSize, IsArray, IsBoolean, IsInt, IsOptional, IsString, Matches, Max, Min, ValidateNested } from 'class-validator';
import { defineContract } from '../contract.js';
import { IsId } from '../validation.js';

const HEX_256 = /^[0-9a-f]{64}$/;
/** Base64 of little-endian 32-bit integers. */
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;
/** The largest challenge (libs/proof LARGE_GPU_CHALLENGE_N): its probe is answered in parts, each one NATS message (probeParts). */
export const PROOF_MAX_N = 8192;

/** `cpu` or `gpu:<index>`. */
const DEVICE = /^(cpu|gpu:\d{1,3})$/;
/** Bytes as a JSON number stay exact below 2^53: 8 PiB, past any GPU's memory. */
const MAX_BYTES = Number.MAX_SAFE_INTEGER;

/**
 * Step 0 of a proof of compute, untimed: get a prover ready on `device` for an n×n product (for a
 * GPU: its container, PyTorch, a CUDA context, the buffers for n on the device, and the claimed
 * memory allocated and touched), without the seed. Only once it is ready does the scheduler send
 * the challenge with the seed, so the timed window holds the product and not the prover's start.
 */
export class HardwareProverPrepare {
  @IsId() challengeId!: string;
  @Matches(DEVICE, { message: 'device must be cpu or gpu:<index>' }) device!: string;
  @IsInt() @Min(31) @Max(PROOF_MAX_N) n!: number;
  /** The device's memory as the machine claims it (a GPU's, from its registration): the prover allocates it, less a margin. */
  @IsOptional() @IsInt() @Min(0) @Max(MAX_BYTES) claimedMemoryBytes?: number;
  /** The scheduler stops waiting for the prover after this long; the agent may drop it then. */
  @IsInt() @Min(1) @Max(600_000) deadlineMs!: number;
}

export class HardwareProverReady {
  /**
   * Device memory the prover allocated and touched, with what the device held for CUDA contexts and
   * other processes (a workload on the GPU) at the time: together at most the device's memory.
   * Absent where nothing was claimed.
   */
  @IsOptional() @IsInt() @Min(0) @Max(MAX_BYTES) allocatedBytes?: number;
}

/**
 * Step 1 of a proof of compute (libs/proof): draw A and B from `seed`, compute C = A·B on
 * `device`, and commit to it. The scheduler times the reply against the claimed device's band.
 */
export class HardwareChallenge {
  @IsId() challengeId!: string;
  /** `cpu` or `gpu:<index>`: the device the machine claims and must compute on. */
  @Matches(DEVICE, { message: 'device must be cpu or gpu:<index>' }) device!: string;
  @Matches(HEX_256, { message: 'seed must be 64 hex digits' }) seed!: string;
  @IsInt() @Min(31) @Max(PROOF_MAX_N) n!: number;
  /** The scheduler stops waiting for the commitment after this long; the agent may drop the work then. */
  @IsInt() @Min(1) @Max(600_000) deadlineMs!: number;
}

export class HardwareCommitment {
  /** The Merkle root over C's rows, hex. */
  @Matches(HEX_256, { message: 'root must be 64 hex digits' }) root!: string;
}

/**
 * Step 2, sent only once the commitment arrived: the probe vectors and the rows to reveal. Where
 * the answer would not fit one NATS message (n = 8192), the rows come in parts, each part with
 * the same vectors and `more` on all but the last: the agent keeps the product until the last.
 */
export class HardwareProbe {
  @IsId() challengeId!: string;
  /** Each vector: n residues mod P as base64 int32s. */
  @IsArray() @ArrayMaxSize(8) @IsString({ each: true }) @Matches(BASE64, { each: true }) vectors!: string[];
  @IsArray() @ArrayMaxSize(64) @IsInt({ each: true }) @Min(0, { each: true }) rows!: number[];
  /** More parts of this probe follow. Absent: the last (or only) part. */
  @IsOptional() @IsBoolean() more?: boolean;
}

export class HardwareRevealedRow {
  @IsInt() @Min(0) index!: number;
  /** The row's n int32 values, base64. */
  @IsString() @Matches(BASE64) values!: string;
  /** Sibling hashes from the row's leaf to the root, hex. */
  @IsArray() @ArrayMaxSize(32) @Matches(HEX_256, { each: true }) proof!: string[];
}

export class HardwareAnswer {
  /** C·r for each probe vector, n residues each, base64 int32s. */
  @IsArray() @ArrayMaxSize(8) @IsString({ each: true }) @Matches(BASE64, { each: true }) products!: string[];
  @IsArray() @ArrayMaxSize(64) @ValidateNested({ each: true }) @Type(() => HardwareRevealedRow) rows!: HardwareRevealedRow[];
}

export const AGENT_PROOF_PREPARE = defineContract({
  subject: 'tern.agent.*.proof.prepare.v1',
  kind: 'request',
  payload: HardwareProverPrepare,
  reply: HardwareProverReady,
  description:
    "Get a prover ready on a claimed device before its timed challenge (libs/proof): start it, allocate the product's buffers and the claimed memory, and answer once ready. Untimed (its own limit). Token: machine id. Sent by the scheduler before each challenge; answered by that machine's agent.",
});

export const AGENT_PROOF_CHALLENGE = defineContract({
  subject: 'tern.agent.*.proof.challenge.v1',
  kind: 'request',
  payload: HardwareChallenge,
  reply: HardwareCommitment,
  description:
    "Prove a claimed device (libs/proof): compute the seeded int8 product on it and answer its Merkle root, with the prover the prepare step of the same challengeId got ready (or one started now, when none was). Token: machine id. Sent by the scheduler at join, on an inventory change and at random times; answered by that machine's agent, timed against the device's band.",
});

export const AGENT_PROOF_PROBE = defineContract({
  subject: 'tern.agent.*.proof.probe.v1',
  kind: 'request',
  payload: HardwareProbe,
  reply: HardwareAnswer,
  description:
    "The probe of a proof challenge, drawn after the commitment: answer C·r for each vector and reveal the chosen rows with their Merkle proofs. Where the answer would not fit one message (n = 8192) the rows come in parts, `more` on all but the last, each answered from the same product. Token: machine id. Sent by the scheduler; answered by that machine's agent.",
});
