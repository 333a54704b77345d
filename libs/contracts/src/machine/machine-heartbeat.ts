import { Type } from 'class-transformer';
import { IsArray, IsIn, IsInt, IsISO8601, IsNumber, IsOptional, IsString, Max, Min, ValidateNested } from 'class-validator';
import { defineContract } from '../contract.js';
import { IsId } from '../validation.js';

export class GpuUsage {
  @IsInt() @Min(0) index!: number;
  @IsString() model!: string;
  @IsInt() @Min(0) memoryMiB!: number;
  /** Free when no container holds it. */
  @IsIn(['free', 'busy']) state!: 'free' | 'busy';
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
}

/** What the scheduler keeps per machine in the heartbeats bucket (HEARTBEATS_BUCKET): the beat, and when it arrived. */
export type HeartbeatSnapshot = MachineHeartbeat & { receivedAt: string };

export const MACHINE_HEARTBEAT = defineContract({
  subject: 'tern.heartbeat.*.v1',
  kind: 'event',
  machineIdField: 'machineId',
  payload: MachineHeartbeat,
  stream: 'HEARTBEATS',
  description:
    'An agent is alive: resource use, free GPUs, running containers. Token: machine id. Default every 10 s. Also published by the gateway for a beta9-style `POST /api/v1/machine/keepalive` (sequence 0). Read by the scheduler (machine states, the heartbeats KV bucket).',
});
