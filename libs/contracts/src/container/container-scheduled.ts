import { Type } from 'class-transformer';
import { IsObject, IsString, ValidateNested } from 'class-validator';
import { defineContract } from '../contract.js';
import { ContainerEvent } from './container-event.js';
import { ContainerResources } from './container-resources.js';

export class ContainerScheduled extends ContainerEvent {
  @IsObject()
  @ValidateNested()
  @Type(() => ContainerResources)
  resources!: ContainerResources;

  /** Why it was placed, e.g. "scale-up", "reschedule: machine m1 offline". */
  @IsString() reason!: string;
}

export const CONTAINER_SCHEDULED = defineContract({
  subject: 'tern.container.*.scheduled.v1',
  kind: 'event',
  machineIdField: 'machineId',
  payload: ContainerScheduled,
  stream: 'EVENTS',
  description:
    'The scheduler placed a container on a machine and is about to send it the start command. Sent by the scheduler; read by the gateway (deployment status) and reputation (start latency is measured from here).',
});
