import { Type } from 'class-transformer';
import { IsISO8601, IsNotEmpty, IsNumber, IsObject, IsString, MaxLength, Min, ValidateNested } from 'class-validator';
import { defineContract } from '../contract.js';
import { ContainerResources } from '../container/container-resources.js';
import { IsId } from '../validation.js';

/**
 * The final usage of one container in one UTC hour. Revisions only ever shorten a container's
 * life (its end moves earlier when a later-arriving event says so), so for each eventId the
 * message with the earliest periodEnd (then the earliest periodStart) is the truth; a slice that a revision removes entirely is
 * sent once more with seconds 0 and periodEnd = periodStart = the hour.
 */
export class UsageIntervalClosed {
  /** `<container id>:<hour, ISO 8601>`: the same slice always has the same id. */
  @IsString() @IsNotEmpty() @MaxLength(200) eventId!: string;
  @IsId() containerId!: string;
  @IsId() machineId!: string;
  @IsId() workspaceId!: string;
  @IsId() deploymentId!: string;

  @IsObject()
  @ValidateNested()
  @Type(() => ContainerResources)
  resources!: ContainerResources;

  @IsISO8601() periodStart!: string;
  @IsISO8601() periodEnd!: string;
  /** periodEnd − periodStart; GPU-seconds are seconds × gpuCount. */
  @IsNumber() @Min(0) seconds!: number;
}

export const USAGE_INTERVAL = defineContract({
  subject: 'tern.usage.interval.v1',
  kind: 'event',
  payload: UsageIntervalClosed,
  stream: 'EVENTS',
  description:
    "A final slice of one container's resource use (one UTC hour, or the part it ran). Sent by metering when a container's usage closes (stop, crash, or its machine lost), after storing it; Nats-Msg-Id `<eventId>@<periodEnd>`. For readers that tally usage elsewhere (billing exports, dashboards): per eventId keep the message with the earliest periodEnd, then the earliest periodStart. Running containers are not sent; their current usage is in the usage API.",
});
