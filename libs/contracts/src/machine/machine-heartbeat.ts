import { Type } from 'class-transformer';
import {
  IsArray,
  IsBoolean,
  IsIn,
  IsInt,
  IsISO8601,
  IsNumber,
  IsObject,
  IsOptional,
  IsString,
  Matches,
  Max,
  MaxLength,
  Min,
  ValidateNested,
} from 'class-validator';
import { defineContract } from '../contract.js';
import { IsId } from '../validation.js';

export class GpuUsage {
  @IsInt() @Min(0) index!: number;
  @IsString() model!: string;
  @IsInt() @Min(0) memoryMiB!: number;
  /** Free when no container holds it. */
  @IsIn(['free', 'busy']) state!: 'free' | 'busy';
}

/** How the agent isolates its containers (operator settings and what the host allowed). */
export class ContainerIsolation {
  @IsString() runtime!: string;
  /** `private`: each container in its own network namespace behind the agent's bridge; `host`: the machine's (no isolation). */
  @IsIn(['private', 'host']) network!: 'private' | 'host';
  /** Container root is an unprivileged host user. */
  @IsBoolean() userNamespaces!: boolean;
}

export class MachineHeartbeat {
  @IsId()
  machineId!: string;

  @IsString() pool!: string;

  /** Agent clock at send time; the receiver compares it with its own to spot skew. */
  @IsISO8601() sentAt!: string;

  /** Increases by one per heartbeat since the agent started; gaps mean lost beats. */
  @IsInt() @Min(0) sequence!: number;

  @IsNumber() @Min(0) @Max(100) cpuPercent!: number;
  @IsNumber() @Min(0) @Max(100) memoryPercent!: number;

  @IsArray()
  @ValidateNested({ each: true })
  @Type(() => GpuUsage)
  gpus!: GpuUsage[];

  @IsArray()
  @IsString({ each: true })
  runningContainers!: string[];

  @IsOptional() @IsString() agentVersion?: string;

  /** Absent: no container runtime (or an agent from before the field). */
  @IsOptional() @IsObject() @ValidateNested() @Type(() => ContainerIsolation) isolation?: ContainerIsolation;

  /** The machine builds images (AGENT_BUILDER=true): the gateway sends it builds (AGENT_IMAGE_BUILD). */
  @IsOptional() @IsBoolean() builder?: boolean;

  /** The site cache its volume chunks are read through (AGENT_SITE_CACHE), as the agent was told: shown, never trusted for access. */
  @IsOptional() @IsString() @MaxLength(300) @Matches(/^https?:\/\/[^/\s]+$/) siteCache?: string;
}

/** What the scheduler keeps per machine in the heartbeats bucket (HEARTBEATS_BUCKET): the beat, and when it arrived. */
export type HeartbeatSnapshot = MachineHeartbeat & { receivedAt: string };

/**
 * Before core-NATS beats (MACHINE_BEAT): agents of the previous release publish here, into the
 * HEARTBEATS stream. The control plane still reads it for one release, so it can be upgraded
 * before its agents; remove it, its stream and its consumers in the release after.
 */
export const MACHINE_HEARTBEAT = defineContract({
  subject: 'tern.heartbeat.*.v1',
  kind: 'event',
  machineIdField: 'machineId',
  payload: MachineHeartbeat,
  stream: 'HEARTBEATS',
  description:
    'An agent is alive, as agents before core-NATS beats sent it (now `tern.beat.*.v1`): the same payload, stored in HEARTBEATS. Token: machine id. Still read by the scheduler and reputation for one release, so agents can be upgraded after the control plane.',
});

export const MACHINE_BEAT = defineContract({
  subject: 'tern.beat.*.v1',
  kind: 'event',
  machineIdField: 'machineId',
  payload: MachineHeartbeat,
  description:
    "An agent is alive: resource use, free GPUs, running containers. Token: machine id. Default every 10 s. Core NATS, stored nowhere: the scheduler's replicas hear each beat once in one queue group, reputation's in another, each writing beats in batches; a beat sent while no replica listens is lost, and each service skips its own downtime instead of holding it against the machines. Also published by the gateway for a beta9-style `POST /api/v1/machine/keepalive` (sequence 0).",
});
