import { ArrayMaxSize, IsArray, IsIn, IsInt, IsOptional, IsString, MaxLength } from 'class-validator';
import { defineContract } from '../contract.js';
import { ContainerEvent } from './container-event.js';

/** Where it failed: preparing the image, creating or starting the runtime, its health check, while running, or with its machine. */
export const CONTAINER_FAILURE_PHASES = ['image', 'create', 'start', 'health', 'runtime', 'machine-lost'] as const;
export type ContainerFailurePhase = (typeof CONTAINER_FAILURE_PHASES)[number];

/** How many of a failed container's last lines its failure carries, and how long each may be. */
export const CRASH_LOG_LINES = 20;
export const CRASH_LOG_LINE_CHARS = 500;

export class ContainerFailed extends ContainerEvent {
  @IsIn(CONTAINER_FAILURE_PHASES) phase!: ContainerFailurePhase;
  @IsString() error!: string;
  /** runtime: the process's exit code (absent when a signal ended it). */
  @IsOptional() @IsInt() exitCode?: number;
  /** The container's last output lines (stderr ones start with "! "), for the crash-loop view of `tern deployments <name>`. */
  @IsOptional()
  @IsArray()
  @ArrayMaxSize(CRASH_LOG_LINES)
  @IsString({ each: true })
  @MaxLength(CRASH_LOG_LINE_CHARS, { each: true })
  lastLines?: string[];
}

export const CONTAINER_FAILED = defineContract({
  subject: 'tern.container.*.failed.v1',
  kind: 'event',
  machineIdField: 'machineId',
  payload: ContainerFailed,
  stream: 'EVENTS',
  description:
    'A container could not start, failed its health check, or died unexpectedly. Sent by the agent, or by the scheduler with phase machine-lost when its machine goes offline; read by the scheduler (replaces it), reputation and the gateway. A failed container that had started is also reported stopped so metering closes its usage.',
});
