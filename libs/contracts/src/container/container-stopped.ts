import { IsBoolean, IsInt, IsOptional, IsString } from 'class-validator';
import { defineContract } from '../contract.js';
import { IsNullable } from '../validation.js';
import { ContainerEvent } from './container-event.js';

export class ContainerStopped extends ContainerEvent {
  /** null when the process was killed by a signal or never reported one. */
  @IsNullable() @IsInt() exitCode!: number | null;
  @IsBoolean() oomKilled!: boolean;
  /** e.g. "stop command: scale-down", "exited", "oom". */
  @IsString() reason!: string;
  /** The signal that ended it, e.g. "SIGTERM", "SIGKILL". */
  @IsOptional() @IsString() signal?: string;
}

export const CONTAINER_STOPPED = defineContract({
  subject: 'tern.container.*.stopped.v1',
  kind: 'event',
  machineIdField: 'machineId',
  payload: ContainerStopped,
  stream: 'EVENTS',
  description:
    'The container is gone and its resources are free, whether asked to stop or not. Sent by the agent; read by metering (usage ends here), the scheduler (desired vs actual), the gateway (drops its routes) and reputation.',
});
