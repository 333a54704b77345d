import { defineContract } from '../contract.js';
import { ContainerEvent } from './container-event.js';

export class ContainerStarting extends ContainerEvent {}

export const CONTAINER_STARTING = defineContract({
  subject: 'tern.container.*.starting.v1',
  kind: 'event',
  machineIdField: 'machineId',
  payload: ContainerStarting,
  stream: 'EVENTS',
  description:
    'The agent accepted a start command and is preparing the container (image, bundle, runc create). Sent by the agent; read by the scheduler (counts it as pending capacity) and the gateway.',
});
