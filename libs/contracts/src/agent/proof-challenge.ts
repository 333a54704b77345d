import { Type } from 'class-transformer';
import { ArrayMaxSize, IsArray, IsInt, IsString, Matches, Max, Min, ValidateNested } from 'class-validator';
import { defineContract } from '../contract.js';
import { IsId } from '../validation.js';

const HEX_256 = /^[0-9a-f]{64}$/;
/** Base64 of little-endian 32-bit integers. */
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;
/** The largest challenge: its answer must fit one NATS message (libs/proof GPU_CHALLENGE_N). */
export const PROOF_MAX_N = 4096;

/**
 * Step 1 of a proof of compute (libs/proof): draw A and B from `seed`, compute C = A·B on
 * `device`, and commit to it. The scheduler times the reply against the claimed device's band.
 */
export class HardwareChallenge {
  @IsId() challengeId!: string;
  /** `cpu` or `gpu:<index>`: the device the machine claims and must compute on. */
  @Matches(/^(cpu|gpu:\d{1,3})$/, { message: 'device must be cpu or gpu:<index>' }) device!: string;
  @Matches(HEX_256, { message: 'seed must be 64 hex digits' }) seed!: string;
  @IsInt() @Min(31) @Max(PROOF_MAX_N) n!: number;
  /** The scheduler stops waiting for the commitment after this long; the agent may drop the work then. */
  @IsInt() @Min(1) @Max(600_000) deadlineMs!: number;
}

export class HardwareCommitment {
  /** The Merkle root over C's rows, hex. */
  @Matches(HEX_256, { message: 'root must be 64 hex digits' }) root!: string;
}

/** Step 2, sent only once the commitment arrived: the probe vectors and the rows to reveal. */
export class HardwareProbe {
  @IsId() challengeId!: string;
  /** Each vector: n residues mod P as base64 int32s. */
  @IsArray() @ArrayMaxSize(8) @IsString({ each: true }) @Matches(BASE64, { each: true }) vectors!: string[];
  @IsArray() @ArrayMaxSize(64) @IsInt({ each: true }) @Min(0, { each: true }) rows!: number[];
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

export const AGENT_PROOF_CHALLENGE = defineContract({
  subject: 'tern.agent.*.proof.challenge.v1',
  kind: 'request',
  payload: HardwareChallenge,
  reply: HardwareCommitment,
  description:
    "Prove a claimed device (libs/proof): compute the seeded int8 product on it and answer its Merkle root. Token: machine id. Sent by the scheduler at join, on an inventory change and at random times; answered by that machine's agent, timed against the device's band.",
});

export const AGENT_PROOF_PROBE = defineContract({
  subject: 'tern.agent.*.proof.probe.v1',
  kind: 'request',
  payload: HardwareProbe,
  reply: HardwareAnswer,
  description:
    "The probe of a proof challenge, drawn after the commitment: answer C·r for each vector and reveal the chosen rows with their Merkle proofs. Token: machine id. Sent by the scheduler; answered by that machine's agent.",
});
