import { IsArray, IsIn, IsInt, IsOptional, IsString, Matches, Min } from 'class-validator';
import { defineContract } from '../contract.js';
import { IsId } from '../validation.js';
import { VOLUME_NAME, VOLUME_NAME_RULE } from '../volume/volumes.js';

export class VolumeCommitAsk {
  @IsId() containerId!: string;
  @Matches(VOLUME_NAME, { message: `volume must be ${VOLUME_NAME_RULE}` }) volume!: string;
}

export const VOLUME_COMMIT_OUTCOMES = ['committed', 'unchanged', 'not-mounted', 'failed'] as const;
export type VolumeCommitOutcomeKind = (typeof VOLUME_COMMIT_OUTCOMES)[number];

/** What one container's commit of one volume did (the commit report). */
export class VolumeCommitAnswer {
  @IsIn(VOLUME_COMMIT_OUTCOMES) outcome!: VolumeCommitOutcomeKind;
  /** The volume's version after the commit (committed only). */
  @IsOptional() @IsInt() @Min(0) version?: number;
  @IsOptional() @IsInt() @Min(0) written?: number;
  @IsOptional() @IsInt() @Min(0) removed?: number;
  /** Files this commit overwrote (or removed) that someone else changed after the container's base version. */
  @IsArray() @IsString({ each: true }) overwritten!: string[];
  /** Entries of the container's copy a volume does not keep (symlinks, empty directories, devices), with why. */
  @IsArray() @IsString({ each: true }) skipped!: string[];
  /** Why it failed or is not mounted. */
  @IsOptional() @IsString() reason?: string;
}

export const AGENT_VOLUME_COMMIT = defineContract({
  subject: 'tern.agent.*.volume.commit.v1',
  kind: 'request',
  payload: VolumeCommitAsk,
  reply: VolumeCommitAnswer,
  description:
    "Commit a running container's (or sandbox's: containerId is then the sandbox's id) read-write copy of a volume now (POST /api/v1/volumes/<name>/commit). Token: machine id. Sent by the gateway to each machine where a container or sandbox of the caller's workspace mounts the volume read-write; answered by that machine's agent with the commit report once its chunks are uploaded and the commit is taken (over the agent's HTTPS volume routes, which check placement again).",
});
