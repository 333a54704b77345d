import { IsBoolean, IsInt, IsOptional, IsString, Min } from 'class-validator';
import { defineContract } from '../contract.js';
import { IsId } from '../validation.js';

export class ContainerStop {
  @IsId() containerId!: string;
  /** Time between SIGTERM and SIGKILL. */
  @IsInt() @Min(0) graceSeconds!: number;
  /** e.g. "scale-down", "deployment replaced", "user stop". */
  @IsString() reason!: string;
}

export class ContainerStopReply {
  /** true also when the container was already gone: stopping is idempotent. */
  @IsBoolean() accepted!: boolean;
  @IsOptional() @IsString() reason?: string;
}

export const AGENT_CONTAINER_STOP = defineContract({
  subject: 'tern.agent.*.container.stop.v1',
  kind: 'request',
  payload: ContainerStop,
  reply: ContainerStopReply,
  description:
    "Stop a container on this machine. Token: machine id. Sent by the scheduler; answered by that machine's agent once the stop is under way; container.stopped follows when it is gone.",
});
