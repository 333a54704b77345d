import { IsInt, Min } from 'class-validator';
import { defineContract } from '../contract.js';
import { ContainerEvent } from './container-event.js';

export class ContainerReady extends ContainerEvent {
  /** From the start command's arrival to the first passing GET /health: the cold start users feel. */
  @IsInt() @Min(0) readyLatencyMs!: number;
}

export const CONTAINER_READY = defineContract({
  subject: 'tern.container.*.ready.v1',
  kind: 'event',
  machineIdField: 'machineId',
  payload: ContainerReady,
  stream: 'EVENTS',
  description:
    "The container passed its health check and takes requests and tasks. Sent by the agent; read by the gateway (adds it to the routes), the autoscaler, the scheduler and reputation (a start that succeeded, timed from the scheduler's start command to when this reached NATS: readyLatencyMs is the agent's own measure, not believed).",
});
