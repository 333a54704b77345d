import { Type } from 'class-transformer';
import { IsObject, IsOptional, IsString, Matches, ValidateNested } from 'class-validator';
import { defineContract } from '../contract.js';
import { MachineRegistryAccess } from '../http/machine-register.js';
import { IsId } from '../validation.js';

/** `POST /api/v1/sandboxes/<id>/snapshot`: where in the workspace's `snapshots/` the image goes. */
export class SnapshotRequest {
  /** The repository under the workspace's `builds/<workspace id>/snapshots/`; default `sandbox`. */
  @IsOptional()
  @Matches(/^[a-z0-9]+(?:[._-][a-z0-9]+)*$/, {
    message: 'name must be lower-case letters and digits, separated by . _ or - (e.g. my-env)',
  })
  name?: string;
  /** Default: the sandbox's id and the time, so that every snapshot is its own. */
  @IsOptional()
  @Matches(/^\w[\w.-]{0,127}$/, { message: 'tag must be 1-128 letters, digits, _ . or -, not starting with . or -' })
  tag?: string;
}

/** The snapshot's answer: `image` is pinned (`…@sha256:`), usable as a sandbox's or a deployment's image. */
export interface SnapshotView {
  image: string;
  digest: string;
  /** `name:tag` as pushed, for people. */
  tag: string;
}

export class SandboxSnapshot {
  @IsId() sandboxId!: string;
  /** The image the new one is laid on (`host/repo@sha256:…`): the sandbox's own, or Tern's base for a `host` sandbox. */
  @IsString() @Matches(/^(?!oci:)/, { message: 'image must be a registry reference' }) image!: string;
  /** Where the snapshot is pushed (`host/builds/<workspace id>/snapshots/<name>:<tag>`). */
  @IsString() target!: string;
  /** Pull of `image`, pull and push of `target`, and nothing else (a token signed for this snapshot). */
  @IsObject() @ValidateNested() @Type(() => MachineRegistryAccess) registry!: MachineRegistryAccess;
}

export class SandboxSnapshotReply {
  /** The pushed manifest's digest; absent with `reason` when it failed. */
  @IsOptional() @IsString() digest?: string;
  @IsOptional() @IsString() reason?: string;
}

export const AGENT_SANDBOX_SNAPSHOT = defineContract({
  subject: 'tern.agent.*.sandbox.snapshot.v1',
  kind: 'request',
  payload: SandboxSnapshot,
  reply: SandboxSnapshotReply,
  description:
    "Push a sandbox's /workspace, as one layer on `image`, to `target`. Token: machine id. Sent by the gateway (POST …/snapshot) to the sandbox's machine with a registry token for this snapshot only; answered once pushed (or with the reason it could not).",
});
