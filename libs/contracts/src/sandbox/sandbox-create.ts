import { Type } from 'class-transformer';
import { IsArray, IsBoolean, IsISO8601, IsObject, IsOptional, IsString, Matches, ValidateNested } from 'class-validator';
import { VolumeMount } from '../agent/container-start.js';
import { defineContract } from '../contract.js';
import { ContainerResources } from '../container/container-resources.js';
import { NetworkPolicy } from '../deployment/deployment-spec.js';
import { IsId, IsRecordOf } from '../validation.js';

export class SandboxCreate {
  @IsId() sandboxId!: string;
  @IsId() workspaceId!: string;
  /** `host` or a registry reference pinned by digest; never `oci:<path>` (a tenant never names a path on the machine). */
  @IsString()
  @Matches(/^(?!oci:)/, { message: 'image must not be an oci:<path> on the machine: "host" or a registry reference' })
  image!: string;
  @IsRecordOf('string') env!: Record<string, string>;
  /** The working directory of its processes; the sandbox's writable directory is /workspace. */
  @Matches(/^\//, { message: 'workdir must be an absolute path' }) workdir!: string;
  @IsObject() @ValidateNested() @Type(() => ContainerResources) resources!: ContainerResources;
  /** What the sandbox may reach; absent: the public internet (the sealed-container rules always apply). */
  @IsOptional() @IsObject() @ValidateNested() @Type(() => NetworkPolicy) network?: NetworkPolicy;
  /** The workspace's volumes it mounts (absent: none), fetched and committed as a container's are. */
  @IsOptional() @IsArray() @ValidateNested({ each: true }) @Type(() => VolumeMount) volumes?: VolumeMount[];
  @IsISO8601() requestedAt!: string;
}

export class SandboxCreateReply {
  /** true once the sandbox's container runs (a repeated create of a running sandbox answers true again). */
  @IsBoolean() running!: boolean;
  @IsOptional() @IsString() reason?: string;
}

export const AGENT_SANDBOX_CREATE = defineContract({
  subject: 'tern.agent.*.sandbox.create.v1',
  kind: 'request',
  payload: SandboxCreate,
  reply: SandboxCreateReply,
  description:
    "Start a sandbox's container on this machine. Token: machine id. Sent by the gateway after it placed the sandbox; answered by that machine's agent once the container runs (or with the reason it cannot). Idempotent on sandboxId.",
});
