import { Type } from 'class-transformer';
import {
  ArrayMaxSize,
  IsArray,
  IsBoolean,
  IsIn,
  IsInt,
  IsISO8601,
  IsObject,
  IsOptional,
  IsString,
  Matches,
  Max,
  Min,
  ValidateNested,
} from 'class-validator';
import { defineContract } from '../contract.js';
import { DEPLOYMENT_KINDS, type DeploymentKind } from '../domain.js';
import { ContainerResources } from '../container/container-resources.js';
import { NetworkPolicy } from '../deployment/deployment-spec.js';
import { IsId, IsRecordOf } from '../validation.js';

export class VolumeMount {
  /** The workspace volume's name. */
  @IsId() volume!: string;
  @Matches(/^\//, { message: 'mountPath must be an absolute path' }) mountPath!: string;
  @IsBoolean() readOnly!: boolean;
}

/** An HTTP GET on the container's $PORT that answers its load: `{"load": <number>}`, or Prometheus text holding `metric`. */
export class LoadProbe {
  @Matches(/^\/[\x21-\x7e]{0,255}$/, { message: 'loadProbe.path must be a path starting with /' }) path!: string;
  @IsOptional()
  @Matches(/^[a-zA-Z_:][a-zA-Z0-9_:]{0,199}$/, { message: 'loadProbe.metric must be a Prometheus metric name' })
  metric?: string;
}

export class ContainerStart {
  @IsId() containerId!: string;
  @IsId() deploymentId!: string;
  @IsInt() @Min(1) deploymentVersion!: number;
  @IsId() workspaceId!: string;
  @IsIn(DEPLOYMENT_KINDS) deploymentKind!: DeploymentKind;

  /**
   * The image: `host`, or a registry image (the gateway pins a tag to its digest when the
   * deployment is made, so every container of a version runs the same bytes; agents pull by
   * digest only and refuse a bare tag).
   * Never `oci:<path>`: a start order carries what a tenant's spec asked for, and a path on this
   * machine is not the tenant's to name. The runtime itself still takes `oci:` layouts from the agent's code.
   */
  @IsString()
  @Matches(/^(?!oci:)/, { message: 'image must not be an oci:<path> on the machine; deployments run "host" or a registry image' })
  image!: string;

  /** Either a handler run by a Tern runner ("app.py:predict") or a command that serves the container contract itself. */
  @IsOptional() @IsString() handler?: string;
  /** Run once per container before it reports ready, in the handler's runner ("app.py:load"). */
  @IsOptional() @IsString() onStart?: string;
  /** Code bundle ("sha256:<hex>" of a tar.gz in the `code` object store), mounted read-only at /app. */
  @IsOptional() @Matches(/^sha256:[0-9a-f]{64}$/, { message: 'code must be "sha256:" and 64 lower-case hex digits' }) code?: string;
  @IsOptional() @IsArray() @IsString({ each: true }) command?: string[];
  @IsOptional() @IsArray() @IsString({ each: true }) args?: string[];

  @IsRecordOf('string') env!: Record<string, string>;
  /** Workspace secrets to set as environment variables: names only; the agent fetches the values for this container from the gateway (AGENT_CONTAINERS_PATH/<id>/secrets). */
  @IsOptional() @IsArray() @ArrayMaxSize(64) @IsString({ each: true }) secrets?: string[];
  @IsOptional() @Matches(/^\//, { message: 'cwd must be an absolute path' }) cwd?: string;

  @IsObject()
  @ValidateNested()
  @Type(() => ContainerResources)
  resources!: ContainerResources;

  @IsArray()
  @ValidateNested({ each: true })
  @Type(() => VolumeMount)
  volumes!: VolumeMount[];

  /** Ports the container listens on inside its network namespace; the first is passed as $PORT. */
  @IsArray()
  @IsInt({ each: true })
  @Min(1, { each: true })
  @Max(65535, { each: true })
  ports!: number[];

  /** What the container may reach (the deployment's `network`); absent: the public internet. */
  @IsOptional() @IsObject() @ValidateNested() @Type(() => NetworkPolicy) network?: NetworkPolicy;

  /** Handler processes in the container. */
  @IsInt() @Min(1) workers!: number;
  /** Requests or tasks each worker handles at once. */
  @IsInt() @Min(1) concurrency!: number;

  /** The readiness check: a path for an HTTP GET that must answer 2xx, or `tcp` (the port accepts a connection); absent: /health. */
  @IsOptional()
  @Matches(/^(tcp|\/[\x21-\x7e]{0,255})$/, { message: 'healthCheck must be a path starting with / or tcp' })
  healthCheck?: string;

  /** Where the agent reads the container's own load for the autoscaler (the spec's load_path and load_metric); absent: it does not. */
  @IsOptional() @IsObject() @ValidateNested() @Type(() => LoadProbe) loadProbe?: LoadProbe;

  /** task_queue, function: error type names whose failures are not retried (the spec's task_policy.no_retry_on). */
  @IsOptional() @IsArray() @ArrayMaxSize(32) @IsString({ each: true }) noRetryOn?: string[];

  /** Longest wait for the first passing health check before the start counts as failed. */
  @IsInt() @Min(1) startupTimeoutSeconds!: number;

  @IsISO8601() requestedAt!: string;
}

export class ContainerStartReply {
  /** true: the agent took it on; progress follows as container events. */
  @IsBoolean() accepted!: boolean;
  /** Why it was refused (not enough free GPUs, unknown volume, …). */
  @IsOptional() @IsString() reason?: string;
}

export const AGENT_CONTAINER_START = defineContract({
  subject: 'tern.agent.*.container.start.v1',
  kind: 'request',
  payload: ContainerStart,
  reply: ContainerStartReply,
  description:
    "Start a container on this machine. Token: machine id. Sent by the scheduler; answered by that machine's agent as soon as it accepts or refuses (not when the container is up: that is reported by container events). Idempotent on containerId: a repeated start of a known container is accepted again.",
});
