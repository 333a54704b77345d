import { IsIn, IsInt, IsISO8601, IsOptional, IsString, Min } from 'class-validator';
import { defineContract } from '../contract.js';
import { IsId } from '../validation.js';

export const LOG_STREAMS = ['stdout', 'stderr'] as const;
export type LogStream = (typeof LOG_STREAMS)[number];

export class ContainerLogLine {
  @IsId() containerId!: string;
  @IsId() deploymentId!: string;
  /** The task being run when the line was written, if any. */
  @IsOptional() @IsId() taskId?: string;
  @IsIn(LOG_STREAMS) stream!: LogStream;
  @IsString() line!: string;
  /** Per container, from 0, so a reader can spot dropped lines. */
  @IsInt() @Min(0) sequence!: number;
  @IsISO8601() at!: string;
}

export const CONTAINER_LOG_LINE = defineContract({
  subject: 'tern.logs.*.*.*.v1',
  kind: 'event',
  payload: ContainerLogLine,
  description:
    "One line a container wrote. Tokens: machine id, deployment id, container id. Sent by the agent that runs the container; the gateway follows one deployment with `tern.logs.*.<deploymentId>.*.v1` while someone runs `tern logs` and relays a line only when its container is that deployment's and placed on the subject's machine. Ephemeral: core NATS, not stored, lost if no one listens.",
});
