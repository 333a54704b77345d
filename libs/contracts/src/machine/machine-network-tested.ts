import { Type } from 'class-transformer';
import { IsISO8601, IsNumber, IsObject, IsOptional, IsString, Min, ValidateNested } from 'class-validator';
import { defineContract } from '../contract.js';
import { IsId } from '../validation.js';

export class NetworkPathResult {
  @IsNumber() @Min(0) throughputMbps!: number;
  /** Round trip of a small message. */
  @IsNumber() @Min(0) latencyMs!: number;
  /** Set when the test over this path failed; throughput and latency are then 0. */
  @IsOptional() @IsString() error?: string;
}

export class MachineNetworkTested {
  @IsId() machineId!: string;

  /** Through the NATS connection the agent already holds: the path requests and tasks take. */
  @IsObject()
  @ValidateNested()
  @Type(() => NetworkPathResult)
  nats!: NetworkPathResult;

  /** Over HTTPS to the gateway: the path image and volume downloads take. */
  @IsObject()
  @ValidateNested()
  @Type(() => NetworkPathResult)
  http!: NetworkPathResult;

  @IsISO8601() testedAt!: string;
}

export const MACHINE_NETWORK_TESTED = defineContract({
  subject: 'tern.machine.*.network-tested.v1',
  kind: 'event',
  machineIdField: 'machineId',
  payload: MachineNetworkTested,
  stream: 'EVENTS',
  description:
    'Result of a network test (throughput and latency over NATS and over HTTP). Sent by the agent after registration and when asked to re-test; read by reputation (benchmark component of the score) and the gateway (machines API).',
});
