import { Type } from 'class-transformer';
import { IsArray, IsBoolean, IsInt, IsObject, IsOptional, IsString, Length, MaxLength, Min, ValidateNested } from 'class-validator';
import { MachineInventory } from '../machine/machine-discovered.js';
import { IsId, IsUserPublicKey } from '../validation.js';

/**
 * The agent's one HTTP call: `POST /api/v1/machine/register` with
 * `Authorization: Bearer <join token | machine token | operator API token>`. Not a NATS message,
 * but shared by the gateway (validation) and the agent (client) like one.
 */
export class MachineRegisterRequest {
  /**
   * Required with an operator API token (the machine is created on the spot); with a join or
   * machine token the id is the token's and a different one is refused.
   */
  @IsOptional() @IsId() machineId?: string;
  @IsString() @Length(1, 63) pool!: string;
  /** As the agent prints it (`tern-agent --version`); at most 64 characters. */
  @IsString() @MaxLength(64) agentVersion!: string;
  /**
   * The public key (U…) of the nkey pair the agent generated for its NATS user; the seed never
   * leaves the machine. The gateway answers with a user JWT for it (`nats.jwt`).
   */
  @IsOptional()
  @IsUserPublicKey()
  natsPublicKey?: string;
  @IsObject()
  @ValidateNested()
  @Type(() => MachineInventory)
  inventory!: MachineInventory;
}

export class NatsConnectionInfo {
  @IsArray() @IsString({ each: true }) servers!: string[];
  /** NATS_NAMESPACE of the installation: the agent rewrites contract subjects with it. */
  @IsString() namespace!: string;
  @IsOptional() @IsString() user?: string;
  @IsOptional() @IsString() pass?: string;
  @IsOptional() @IsString() token?: string;
  /**
   * The machine's own NATS user JWT (operator mode) for the natsPublicKey of the request: its
   * permissions name this machine only. Short-lived: the agent registers again to renew it.
   */
  @IsOptional() @IsString() jwt?: string;
}

/** The image registry and this machine's user there (pull only, unless the machine builds). */
export class MachineRegistryAccess {
  /** `host[:port]`, as image references name it. */
  @IsString() host!: string;
  /** Plain HTTP: a registry on loopback beside the control plane. */
  @IsBoolean() insecure!: boolean;
  @IsOptional() @IsString() username?: string;
  @IsOptional() @IsString() password?: string;
  /**
   * The registry takes the gateway's tokens: the agent logs in with its machine id and machine
   * token (no username/password here), and gets pull access to the images placed on it only.
   */
  @IsOptional() @IsBoolean() tokenAuth?: boolean;
  /** A registry token the gateway signed for one piece of work (a build's base and target), instead of a user. */
  @IsOptional() @IsString() token?: string;
}

export class MachineRegisterResponse {
  @IsId() machineId!: string;
  @IsString() pool!: string;
  /**
   * The machine's own credential, returned when a join or admin token was redeemed: the
   * agent keeps it (config.yaml) and presents it to register again after a restart.
   */
  @IsOptional() @IsString() machineToken?: string;
  @IsObject()
  @ValidateNested()
  @Type(() => NatsConnectionInfo)
  nats!: NatsConnectionInfo;
  @IsInt() @Min(1) heartbeatIntervalSeconds!: number;
  @IsInt() @Min(1) heartbeatTtlSeconds!: number;
  /** Where images come from: the agent pulls `host/…@sha256:…` with these credentials. */
  @IsOptional()
  @IsObject()
  @ValidateNested()
  @Type(() => MachineRegistryAccess)
  registry?: MachineRegistryAccess;
  /** The pool's minimum network throughput, so the agent can say why it is unschedulable. */
  @IsOptional() @IsInt() @Min(0) minNetworkMbps?: number;
}

export class MachineKeepaliveMetrics {
  @IsOptional() @IsInt() @Min(0) totalCpuAvailable?: number;
  @IsOptional() @IsInt() @Min(0) totalMemoryAvailable?: number;
  @IsOptional() @Min(0) cpuUtilizationPct?: number;
  @IsOptional() @Min(0) memoryUtilizationPct?: number;
  @IsOptional() @IsInt() @Min(0) freeGpuCount?: number;
}

/** beta9's `POST /api/v1/machine/keepalive`, for agents that speak its HTTP protocol. */
export class MachineKeepaliveRequest {
  @IsId() machineId!: string;
  @IsOptional() @IsString() @MaxLength(63) poolName?: string;
  @IsOptional() @IsString() @MaxLength(64) agentVersion?: string;
  @IsOptional()
  @IsObject()
  @ValidateNested()
  @Type(() => MachineKeepaliveMetrics)
  metrics?: MachineKeepaliveMetrics;
}
