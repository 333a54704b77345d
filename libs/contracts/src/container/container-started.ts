import { Type } from 'class-transformer';
import { IsInt, IsObject, Min, ValidateNested } from 'class-validator';
import { defineContract } from '../contract.js';
import { ContainerEvent } from './container-event.js';
import { ContainerResources } from './container-resources.js';

export class ContainerStarted extends ContainerEvent {
  @IsObject()
  @ValidateNested()
  @Type(() => ContainerResources)
  resources!: ContainerResources;

  /** From the start command's arrival to the process running. */
  @IsInt() @Min(0) startupLatencyMs!: number;
}

export const CONTAINER_STARTED = defineContract({
  subject: 'tern.container.*.started.v1',
  kind: 'event',
  machineIdField: 'machineId',
  payload: ContainerStarted,
  stream: 'EVENTS',
  description:
    "The container's process is running (not yet healthy). Sent by the agent; read by metering (usage starts here), reputation (start latency) and the scheduler.",
});
