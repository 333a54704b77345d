import { Type } from 'class-transformer';
import {
  ArrayMaxSize,
  ArrayMinSize,
  IsArray,
  IsBoolean,
  IsIn,
  IsInt,
  IsNumber,
  IsObject,
  IsOptional,
  IsPositive,
  IsString,
  IsUrl,
  Matches,
  Max,
  Min,
  ValidateIf,
  ValidateNested,
} from 'class-validator';
import { DEPLOYMENT_KINDS, type DeploymentKind } from '../domain.js';
import { SECRET_ENV_NAME, SECRET_NAME, SECRET_NAME_RULE } from '../secret/secrets.js';
import { allOf, IsIpv4Cidr, IsRecordOf } from '../validation.js';
import { type ImageBuild, IsDeploymentImage } from './image-spec.js';
import { SpecSchedule } from './schedule.js';
import { SpecTaskPolicy } from './task-policy.js';

/** Cores a deployment's container or a sandbox asks for. */
export const IsCpuCores = () => allOf(IsNumber(), Min(0.05), Max(512));
/** GPUs a deployment's container or a sandbox asks for. */
export const IsGpuCount = () => allOf(IsInt(), Min(0), Max(16));
/** The pool a deployment or a sandbox is placed in. */
export const IsPoolName = () => Matches(/^[a-z0-9][a-z0-9-]{0,62}$/, { message: 'pool must be a pool name' });

/**
 * A deployment as the user writes it (`tern deploy tern.yaml`), in snake_case like Beam's and
 * RunPod's specs. The gateway validates it (400 naming the field and the rule), fills the
 * defaults (`normalizeSpec`) and stores every deploy as a new immutable version.
 */
export class QueueDepthPolicy {
  @IsIn(['queue_depth']) type!: 'queue_depth';
  @IsOptional() @IsInt() @Min(0) @Max(1000) min_containers?: number;
  @IsOptional() @IsInt() @Min(1) @Max(1000) max_containers?: number;
  /** Requests or tasks one container should carry; defaults to workers × concurrent_requests. */
  @IsOptional() @IsInt() @Min(1) tasks_per_container?: number;
}

export class RequestLatencyPolicy {
  @IsIn(['request_latency']) type!: 'request_latency';
  @IsOptional() @IsInt() @Min(0) @Max(1000) min_containers?: number;
  @IsOptional() @IsInt() @Min(1) @Max(1000) max_containers?: number;
  /** Seconds a request may wait plus run before another container is worth starting. */
  @IsNumber() @Min(0.01) desired_latency!: number;
}

/**
 * Learns the arrival rate and task duration (moving averages over a stable and a panic window),
 * sizes by Little's law plus the queue, and starts containers ahead of bursts that recur at a
 * steady period. Every knob has a default.
 */
export class PredictivePolicy {
  @IsIn(['predictive']) type!: 'predictive';
  @IsOptional() @IsInt() @Min(0) @Max(1000) min_containers?: number;
  @IsOptional() @IsInt() @Min(1) @Max(1000) max_containers?: number;
  /** Tasks one container runs at once; defaults to workers × concurrent_requests. */
  @IsOptional() @IsInt() @Min(1) tasks_per_container?: number;
  /** Seconds a queued task may wait before it starts; default 10. */
  @IsOptional() @IsNumber() @Min(0.01) @Max(86400) desired_latency?: number;
  /** Share of the workers the learned arrival rate should keep busy (headroom for noise); default 0.8. */
  @IsOptional() @IsNumber() @Min(0.1) @Max(1) target_utilization?: number;
  /** Seconds of the long moving average of arrivals; default 60. */
  @IsOptional() @IsInt() @Min(10) @Max(3600) stable_window?: number;
  /** Seconds of the short moving average that detects bursts; default 6, at most stable_window. */
  @IsOptional() @IsInt() @Min(1) @Max(600) panic_window?: number;
  /** Start containers ahead of bursts that recur at a steady period; default true. */
  @IsOptional() @IsBoolean() prewarm?: boolean;
}

/**
 * Knative's concurrency target, Modal's target inputs: one container per target_concurrency
 * requests in flight or waiting, a soft target below the hard limit (workers ×
 * concurrent_requests) so a container starts before the others are full.
 */
export class ConcurrencyPolicy {
  @IsIn(['concurrency']) type!: 'concurrency';
  @IsOptional() @IsInt() @Min(0) @Max(1000) min_containers?: number;
  @IsOptional() @IsInt() @Min(1) @Max(1000) max_containers?: number;
  /** In-flight requests one container should carry; default (and at most) workers × concurrent_requests. */
  @IsOptional() @IsInt() @Min(1) target_concurrency?: number;
  /**
   * The load one container's own server should carry, as it reports it at load_path (vLLM's
   * waiting requests, queued tokens, …): ceil(sum of reports / target_load) containers, when
   * more than the requests ask for.
   */
  @IsOptional() @IsNumber({ allowNaN: false, allowInfinity: false }) @Min(0.001) @Max(1_000_000) target_load?: number;
  /** Where the agent reads a container's load every 2 s (GET on $PORT); default /load, answering `{"load": <number>}`. */
  @IsOptional()
  @Matches(/^\/[\x21-\x7e]{0,255}$/, { message: 'load_path must be a path starting with / (e.g. /load or /metrics)' })
  load_path?: string;
  /** Read load_path as Prometheus text and take this metric (summed over its series), e.g. vllm:num_requests_waiting. */
  @IsOptional()
  @Matches(/^[a-zA-Z_:][a-zA-Z0-9_:]{0,199}$/, { message: 'load_metric must be a Prometheus metric name (e.g. vllm:num_requests_waiting)' })
  load_metric?: string;
}

/** A volume of the workspace mounted at `path` (or `mount_path`), `mode: ro` (or `read_only: true`) or rw (the default). */
export class SpecVolume {
  @Matches(/^[a-z0-9][a-z0-9-]{0,62}$/, { message: 'volumes.name must be lower-case letters, digits or -' }) name!: string;
  @ValidateIf((v: SpecVolume) => v.path === undefined)
  @Matches(/^\/[^\0]*$/, { message: 'volumes.mount_path (or path) must be an absolute path' })
  mount_path?: string;
  @IsOptional() @Matches(/^\/[^\0]*$/, { message: 'volumes.path must be an absolute path' }) path?: string;
  @IsOptional() @IsBoolean({ message: 'volumes.read_only must be true or false' }) read_only?: boolean;
  @IsOptional() @IsIn(['rw', 'ro'], { message: 'volumes.mode must be rw or ro' }) mode?: 'rw' | 'ro';
}

/**
 * What the deployment's containers may reach on the network. Never the machine they run on,
 * another container, the control plane, or private, link-local (cloud metadata) and other
 * reserved ranges; of the rest (the public internet): nothing with `block: true`, only the
 * IPv4 CIDRs in `allow`, everything when neither is given. Also the start order's field.
 */
export class NetworkPolicy {
  @IsOptional() @IsBoolean() block?: boolean;
  @IsOptional() @IsArray() @ArrayMaxSize(64) @IsIpv4Cidr() allow?: string[];
}

/**
 * Which machines may run it (the trust tier): `verified: true` only machines whose hardware
 * passed its challenge; `verified: false` unverified ones too, even with secrets, volumes or a
 * private image (which otherwise ask for verified machines). Quarantined machines run nothing.
 */
export class SpecPlacement {
  @IsOptional() @IsBoolean({ message: 'placement.verified must be true or false' }) verified?: boolean;
  /** As the top-level min_reputation (the stricter of the two applies). */
  @IsOptional() @IsNumber() @Min(0) @Max(1) min_reputation?: number;
}

/**
 * Spot checks of results (task_queue, function): `sample` (0 < sample ≤ 1) of the tasks also run
 * on another verified machine of higher reputation, and the outputs are compared byte for byte.
 */
export class SpecVerify {
  @IsNumber({}, { message: 'verify.sample must be a number' })
  @IsPositive({ message: 'verify.sample must be above 0 (0.02 checks 2 % of tasks)' })
  @Max(1, { message: 'verify.sample must be at most 1 (every task)' })
  sample!: number;
}

export class DeploymentSpec {
  @Matches(/^[a-z0-9][a-z0-9-]{0,62}$/, { message: 'name must be 1-63 lower-case letters, digits or -, starting with a letter or digit' })
  name!: string;

  @IsIn(DEPLOYMENT_KINDS) kind!: DeploymentKind;

  /**
   * `host` (the host's /usr, runs its Python and Node; the default, for development), an image in
   * a registry (`registry.example.com/team/model:1.2` or `…@sha256:<digest>`), or a build
   * (ImageBuild). `oci:<path>` stays the runtime's (the agent's and tests'): a tenant's spec
   * never names a path on the worker.
   */
  @IsOptional()
  @IsDeploymentImage()
  image?: string | ImageBuild;

  /**
   * The workspace secret (`tern secret set NAME`, holding `<username>:<password>`) to pull `image`
   * from its registry with. The gateway copies the image by digest into Tern's registry and the
   * machines run the copy: a workspace's credentials never leave the control plane.
   */
  @IsOptional()
  @Matches(SECRET_NAME, { message: `registry_secret must name a secret: ${SECRET_NAME_RULE}` })
  registry_secret?: string;

  /**
   * `app.py:predict` or `app.py:Model.predict` (Python runner: the class is instantiated once per
   * container, its `@tern.enter` methods run, then the method serves), or `app.js:predict` /
   * `app.mjs:predict` (Node runner).
   */
  @IsOptional()
  @Matches(/^([\w./-]+\.py:[A-Za-z_]\w*(\.[A-Za-z_]\w*)?|[\w./-]+\.(js|mjs|cjs):[A-Za-z_$][\w$]*)$/, {
    message: 'handler must look like app.py:predict, app.py:Model.predict or app.js:predict',
  })
  handler?: string;

  /** Runs once per container before it takes requests (load a model): same form as handler. */
  @IsOptional()
  @Matches(/^[\w./-]+\.(py|js|mjs|cjs):[A-Za-z_$][\w$]*$/, { message: 'on_start must look like app.py:load' })
  on_start?: string;

  /** Your own server on $PORT instead of a handler; it runs in /app, the spec's folder. */
  @IsOptional() @IsArray() @ArrayMinSize(1) @IsString({ each: true }) command?: string[];
  /** command: how the agent tells the server is ready: `http` (the default, GET health_path answers 2xx) or `tcp` ($PORT accepts a connection). */
  @IsOptional() @IsIn(['http', 'tcp'], { message: 'health_check must be http or tcp' }) health_check?: 'http' | 'tcp';
  /** Seconds a new container may take to pass its readiness check (a model server loading weights); default 120. */
  @IsOptional() @IsInt() @Min(1) @Max(3600) startup_timeout?: number;
  /** command, health_check http: the path probed; default /health. */
  @IsOptional()
  @Matches(/^\/[\x21-\x7e]{0,255}$/, {
    message: 'health_path must be a path starting with / (printable, no spaces, at most 256 characters)',
  })
  health_path?: string;

  /** Content address of the uploaded code (`PUT /api/v1/code/<sha256>`), mounted at /app. */
  @IsOptional() @Matches(/^sha256:[a-f0-9]{64}$/, { message: 'code must be sha256:<64 hex digits>' }) code?: string;

  /** Cores, e.g. 0.5 or 2; default 1. */
  @IsOptional() @IsCpuCores() cpu?: number;
  /** "512Mi", "2Gi", or a number of MiB; default 512Mi. */
  @IsOptional() memory?: string | number;
  /** A GPU type ("A100"), a list in order of preference, or "any". */
  @IsOptional() gpu?: string | string[];
  @IsOptional() @IsGpuCount() gpu_count?: number;

  @IsOptional() @IsInt() @Min(1) @Max(64) workers?: number;
  @IsOptional() @IsInt() @Min(1) @Max(1000) concurrent_requests?: number;
  @IsOptional() @IsInt() @Min(0) @Max(86400) keep_warm_seconds?: number;
  /**
   * Seconds a task may take; for an endpoint, seconds until its response starts (a container
   * taken and the response's status sent), default 180.
   */
  @IsOptional() @IsInt() @Min(1) @Max(86400) timeout?: number;
  /** endpoint: seconds a started response may go without a byte before Tern ends it (default 60). */
  @IsOptional() @IsInt() @Min(1) @Max(86400) idle_timeout?: number;
  /** endpoint: seconds a request may take in all, a stream included (default 3600). */
  @IsOptional() @IsInt() @Min(1) @Max(86400) max_duration?: number;

  @IsOptional()
  @IsObject()
  @ValidateNested()
  @Type(() => QueueDepthPolicy, {
    discriminator: {
      property: 'type',
      subTypes: [
        { value: QueueDepthPolicy, name: 'queue_depth' },
        { value: RequestLatencyPolicy, name: 'request_latency' },
        { value: PredictivePolicy, name: 'predictive' },
        { value: ConcurrencyPolicy, name: 'concurrency' },
      ],
    },
    keepDiscriminatorProperty: true,
  })
  autoscaler?: QueueDepthPolicy | RequestLatencyPolicy | PredictivePolicy | ConcurrencyPolicy;

  @IsOptional() @IsRecordOf('string') env?: Record<string, string>;
  /**
   * Workspace secrets (`tern secret set HF_TOKEN`) set as environment variables of the same name
   * when each container starts: never in the spec, the image, logs or the API. Names must be
   * environment variable names.
   */
  @IsOptional()
  @IsArray()
  @ArrayMaxSize(64)
  @Matches(SECRET_ENV_NAME, {
    each: true,
    message: 'secrets must name workspace secrets whose names are environment variable names (HF_TOKEN: letters, digits and _)',
  })
  secrets?: string[];
  @IsOptional() @IsArray() @ValidateNested({ each: true }) @Type(() => SpecVolume) volumes?: SpecVolume[];

  /** task_queue: retries, timeout and ttl of its tasks (a submit may override each). */
  @IsOptional() @IsObject() @ValidateNested() @Type(() => SpecTaskPolicy) task_policy?: SpecTaskPolicy;
  /** function, task_queue: run on a cron schedule or a fixed period, once per tick whatever the number of scheduler replicas. */
  @IsOptional() @IsObject() @ValidateNested() @Type(() => SpecSchedule) schedule?: SpecSchedule;
  /** task_queue: tasks that may wait at once; a submit beyond it gets 429. Default 10000. */
  @IsOptional() @IsInt() @Min(1) @Max(10_000_000) max_pending_tasks?: number;
  /** task_queue: where the result of each task is POSTed when it ends (a submit may give its own). */
  @IsOptional()
  @IsUrl({ require_tld: false, protocols: ['http', 'https'] }, { message: 'callback_url must be an http(s) URL' })
  callback_url?: string;

  /** `{ block: true }` or `{ allow: [CIDR, …] }`; default: the public internet (see NetworkPolicy). */
  @IsOptional() @IsObject() @ValidateNested() @Type(() => NetworkPolicy) network?: NetworkPolicy;

  @IsOptional() @IsPoolName() pool?: string;
  @IsOptional() @IsNumber() @Min(0) @Max(1) min_reputation?: number;
  @IsOptional() @IsObject() @ValidateNested() @Type(() => SpecPlacement) placement?: SpecPlacement;
  /** task_queue, function: spot checks of results on another machine (SpecVerify). */
  @IsOptional() @IsObject() @ValidateNested() @Type(() => SpecVerify) verify?: SpecVerify;
}
