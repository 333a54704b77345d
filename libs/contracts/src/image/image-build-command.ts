import { Type } from 'class-transformer';
import { IsObject, IsOptional, IsString, ValidateNested } from 'class-validator';
import { defineContract } from '../contract.js';
import { ImageBuild } from '../deployment/image-spec.js';
import { MachineRegistryAccess } from '../http/machine-register.js';
import { InvokeHead, InvokeResponseHead } from '../invoke/invoke.js';

/**
 * What a builder machine is asked to build: the JSON body of an AGENT_IMAGE_BUILD request. The
 * gateway resolved the base to a digest and chose the target tag (the spec's hash) before asking.
 */
export class ImageBuildCommand {
  @IsObject() @ValidateNested() @Type(() => ImageBuild) build!: ImageBuild;
  /** The base, pinned: `host/repo@sha256:…`. */
  @IsString() base!: string;
  /** Where the result is pushed: `host/builds/<name>:<spec hash>`. */
  @IsString() target!: string;
  /** The registry user that may push to the target's registry (a builder's only). */
  @IsObject() @ValidateNested() @Type(() => MachineRegistryAccess) push!: MachineRegistryAccess;
  /** The spec's folder (tar.gz, base64), bound read-only at /tern/context: where `pip_wheels` is. */
  @IsOptional() @IsString() context?: string;
}

/**
 * One line of a build's NDJSON answer (the builder's to the gateway, the gateway's to
 * `POST /api/v1/images/builds`). `step` opens a step (1-based `index` of `total`), `log` is a
 * line of its output, and exactly one of `built` or `failed` ends the answer. `reused`: the
 * registry had the spec's image already, and nothing ran.
 */
export type ImageBuildEvent =
  | { type: 'step'; index: number; total: number; name: string; summary: string; cached: boolean }
  | { type: 'log'; line: string }
  | { type: 'built'; ref: string; digest: string; cachedSteps: number; steps: number; seconds: number; reused?: boolean }
  | { type: 'failed'; step?: string; message: string };

export const AGENT_IMAGE_BUILD = defineContract({
  subject: 'tern.agent.*.image.build.*.v1',
  kind: 'request',
  payload: InvokeHead,
  reply: InvokeResponseHead,
  description: [
    "Build an image on a builder machine (an agent started with AGENT_BUILDER=true). Tokens: machine id, build id (only that machine's agent may hear it). Sent by the gateway, which chose the machine among the ready builders, resolved the base to its digest and checked that the spec's tag is not in the registry yet.",
    'Same protocol as tern.agent.*.invoke.*.v1: `POST /build`, the body an ImageBuildCommand as JSON (large ones travel through the bodies store); the answer streams NDJSON ImageBuildEvent lines (`step`, `log`, then `built` or `failed`) as the build runs, one layer per step, layers cached on the builder by hash(parent digest, step).',
  ].join('\n\n'),
});
