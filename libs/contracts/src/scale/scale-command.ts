import { IsArray, IsInt, IsISO8601, IsString, Min } from 'class-validator';
import { defineContract } from '../contract.js';
import { IsId } from '../validation.js';

export class ScaleCommand {
  @IsId() deploymentId!: string;
  @IsInt() @Min(1) deploymentVersion!: number;
  @IsInt() @Min(0) desired!: number;
  @IsString() reason!: string;
  /** Containers idle longer than keep_warm_seconds: the only ones the scheduler may stop to come down to desired. */
  @IsArray() @IsString({ each: true }) idleContainers!: string[];
  /** The scheduler ignores a command older than the last one it applied for the deployment. */
  @IsISO8601() issuedAt!: string;
}

export const SCALE_COMMAND = defineContract({
  subject: 'tern.command.scale.*.v1',
  kind: 'command',
  payload: ScaleCommand,
  stream: 'COMMANDS',
  description:
    'Run this many containers of a deployment. Token: deployment id. Sent by the autoscaler; consumed by the scheduler, which reconciles desired against actual (placing, backlogging or stopping idle containers).',
});
