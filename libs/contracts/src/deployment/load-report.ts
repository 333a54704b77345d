import { Type } from 'class-transformer';
import { ArrayMaxSize, IsArray, IsInt, IsISO8601, IsNumber, IsString, Min, ValidateNested } from 'class-validator';
import { defineContract } from '../contract.js';
import { IsId } from '../validation.js';

export class ContainerLoad {
  @IsId() containerId!: string;
  @IsInt() @Min(0) inFlight!: number;
  /** Seconds since its last request finished (0 while busy). */
  @IsNumber() @Min(0) idleSeconds!: number;
}

export class LoadReport {
  /** One gateway replica; the autoscaler sums the latest report of each. */
  @IsString() gatewayId!: string;
  @IsId() deploymentId!: string;
  @IsInt() @Min(1) version!: number;
  @IsInt() @Min(0) inFlight!: number;
  /** Requests held because no container had room. */
  @IsInt() @Min(0) buffered!: number;
  /** Mean time inside containers over the last report period, for request_latency. */
  @IsNumber() @Min(0) meanDurationMs!: number;
  @IsArray()
  @ValidateNested({ each: true })
  @Type(() => ContainerLoad)
  containers!: ContainerLoad[];
  @IsISO8601() at!: string;
}

export const LOAD_REPORT = defineContract({
  subject: 'tern.load.*.v1',
  kind: 'event',
  payload: LoadReport,
  description:
    "An endpoint version's load as one gateway sees it: in-flight and buffered requests, per-container in-flight and idle time. Token: deployment id. Sent by every gateway replica once a second while the version has traffic or containers; read by the autoscaler. Core NATS: only the latest matters.",
});

/** A machine's load report of one task-queue version: the same figures, naming the machine. */
export class AgentLoadReport extends LoadReport {
  @IsId() machineId!: string;
}

export const AGENT_LOAD_REPORT = defineContract({
  subject: 'tern.load.*.*.v1',
  kind: 'event',
  machineIdField: 'machineId',
  payload: AgentLoadReport,
  description:
    "A task-queue version's load as one machine's agent sees it (in-flight tasks, mean duration). Tokens: machine id, deployment id. Sent by the agent once a second while it runs tasks of the version; read by the autoscaler, which counts it only while the version has a container placed on that machine. Core NATS: only the latest matters.",
});

export class ContainerServerLoad {
  @IsId() containerId!: string;
  /** What the container's server answered at its load probe; the autoscaler caps it again. */
  @IsNumber({ allowNaN: false, allowInfinity: false }) @Min(0) load!: number;
}

/** The loads one machine's containers of a version report about themselves (autoscaler target_load). */
export class ServerLoadReport {
  @IsId() machineId!: string;
  @IsId() deploymentId!: string;
  @IsInt() @Min(1) version!: number;
  @IsArray()
  @ArrayMaxSize(1000)
  @ValidateNested({ each: true })
  @Type(() => ContainerServerLoad)
  containers!: ContainerServerLoad[];
  @IsISO8601() at!: string;
}

export const SERVER_LOAD_REPORT = defineContract({
  subject: 'tern.serverload.*.*.v1',
  kind: 'event',
  machineIdField: 'machineId',
  payload: ServerLoadReport,
  description:
    "The load a version's containers on one machine report about themselves (their load_path, read by the agent every 2 s), for a concurrency policy's target_load. Tokens: machine id, deployment id. Read by the autoscaler, which counts a container's load only while the routes place that container on that machine for that version, and only to size that version. Core NATS: only the latest matters.",
});
