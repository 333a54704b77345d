import { Type } from 'class-transformer';
import { IsISO8601, IsNotEmpty, IsNumber, IsObject, IsOptional, IsString, MaxLength, Min, ValidateNested } from 'class-validator';
import { defineContract } from '../contract.js';
import { ContainerResources } from '../container/container-resources.js';
import { IsId } from '../validation.js';

export class UsageInterval {
  /** Deterministic (container id + period start), so a recomputed interval is the same record; also the Nats-Msg-Id. */
  @IsString() @IsNotEmpty() @MaxLength(200) eventId!: string;
  @IsId() containerId!: string;
  @IsId() machineId!: string;
  @IsId() workspaceId!: string;
  @IsId() deploymentId!: string;
  /** Set when the container ran one task during the whole interval. */
  @IsOptional() @IsId() taskId?: string;

  @IsObject() @ValidateNested() @Type(() => ContainerResources)
  resources!: ContainerResources;

  @IsISO8601() periodStart!: string;
  @IsISO8601() periodEnd!: string;
  /** periodEnd − periodStart; GPU-seconds are seconds × gpuCount. */
  @IsNumber() @Min(0) seconds!: number;
}

export const USAGE_INTERVAL = defineContract({
  subject: 'tern.usage.interval.v1',
  kind: 'event',
  payload: UsageInterval,
  stream: 'EVENTS',
  description:
    "A closed slice of one container's resource use. Sent by metering, which cuts intervals from container lifecycle events (at each period boundary and at stop) and stores them; read by whoever tallies usage live (rewards, dashboards), deduplicating on eventId.",
});
