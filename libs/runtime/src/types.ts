/**
 * The container runtime's vocabulary. Framework-free: the agent wraps it, the bench and the
 * integration tests use it directly.
 */

export type RuntimeKind = 'runc' | 'nerdctl';

/** `host` (the host's /usr, read-only: its Python and Node) or `oci:<layout path>[:<tag>]`. */
export type ImageRef = string;

export interface UserSpec {
  uid: number;
  gid: number;
}

export interface VolumeSpec {
  /** A name under the agent's volume root, e.g. `ws_1/models` (no `..`, no leading `/`). */
  name: string;
  containerPath: string;
  readOnly?: boolean;
  /**
   * The directory to mount instead of `<volume root>/<name>`: a volume the agent materialized
   * from the gateway (absolute). A writable one is handed to the container's user whole.
   */
  hostPath?: string;
}

/**
 * A directory of the host bound read-only into the container: what the agent itself provides
 * (a code bundle at /app, Tern's runners at /tern/runners), never a user's choice of path.
 */
export interface HostBind {
  hostPath: string;
  containerPath: string;
}

/** One GPU given to a container, as the agent's hardware discovery names it. */
export interface GpuDeviceRef {
  /** The host's index (nvidia-smi order, `/dev/nvidia<index>`). */
  index: number;
  /** `GPU-…` when known: unambiguous whatever order CUDA enumerates in. */
  uuid?: string;
}

export interface GpuAssignment {
  devices: GpuDeviceRef[];
}

/**
 * `private`: the container's own network namespace on the agent's bridge (BridgeNetwork): its
 * own address, where it listens on `$PORT` and the agent reaches it, outbound traffic NATed
 * to the public internet only (see EgressPolicy). `host`: it shares the machine's network
 * namespace and listens on its own `$PORT` on loopback (an operator's choice for hosts that
 * cannot run the bridge: no isolation at all between containers and the host). `none`: a
 * namespace with loopback only, for work that needs no network.
 */
export type NetworkMode = 'private' | 'host' | 'none';

/**
 * What a container on the private network may reach beyond what none ever does (the host,
 * other containers, private and reserved ranges): nothing (`block`), only these IPv4 CIDRs
 * (`allow`), or, when neither is given, the public internet.
 */
export interface EgressPolicy {
  block?: boolean;
  allow?: string[];
}

export interface ContainerSpec {
  /** 1-128 of letters, digits, `_`, `-`, `.`; starts with a letter or digit. */
  id: string;
  image: ImageRef;
  /** The process; empty or absent: the image's entrypoint + cmd. */
  args?: string[];
  env?: Record<string, string>;
  cwd?: string;
  /** Default: the image's user if it names one, else 65534 (nobody). */
  user?: UserSpec;
  memoryBytes?: number;
  cpuMillicores?: number;
  pidsLimit?: number;
  /** Size of the tmpfs on /tmp (default 256 MiB; it counts against memoryBytes as it fills). */
  tmpBytes?: number;
  /** Size of /dev/shm (default 64 MiB). */
  shmBytes?: number;
  volumes?: VolumeSpec[];
  /** Host directories bound read-only (see HostBind). */
  binds?: HostBind[];
  gpus?: GpuAssignment;
  /** `$PORT`; with host networking, one is allocated when absent. */
  port?: number;
  network?: NetworkMode;
  /** `private` network only. */
  egress?: EgressPolicy;
  /** Kept with the container and returned by list(): deployment, workspace, … */
  labels?: Record<string, string>;
}

export interface ExitResult {
  /** null when a signal ended the process (see `signal`) or the exit status was lost. */
  exitCode: number | null;
  /** e.g. `SIGKILL`, when the process died of a signal (runc reports 128+n). */
  signal?: string;
  /** The kernel's OOM killer killed a process of this container (its memory cgroup counted a kill). */
  oomKilled: boolean;
  finishedAt: string;
}

export interface ImageInfo {
  ref: ImageRef;
  digest: string;
}

export interface RunningContainer {
  id: string;
  runtime: RuntimeKind;
  image: ImageInfo;
  labels: Record<string, string>;
  port?: number;
  /** Where the agent reaches `port`: the container's address on a private network, else loopback. */
  address?: string;
  /** Host pid of the container's first process, when the runtime exposes it. */
  pid?: number;
  startedAt: string;
}

export type ContainerStatus = 'creating' | 'running' | 'paused' | 'stopped' | 'unknown';

export interface ManagedContainer extends RunningContainer {
  status: ContainerStatus;
  /** Present once the container has stopped and its exit is known. */
  exit?: ExitResult;
}

export type LogStream = 'stdout' | 'stderr';

export interface LogLine {
  containerId: string;
  stream: LogStream;
  line: string;
  /** When the runtime read it (runc) or the runtime's timestamp (nerdctl). */
  time: Date;
}

export interface LogOptions {
  /** Keep reading until the container exits (default true). */
  follow?: boolean;
  signal?: AbortSignal;
}

export interface ContainerRuntime {
  readonly kind: RuntimeKind;
  /** Resolves once the container's process is running; rejects (and cleans up) when it cannot start. */
  start(spec: ContainerSpec): Promise<RunningContainer>;
  /** SIGTERM, then SIGKILL after graceMs; resolves with how it ended. Leaves it listed until remove(). */
  stop(id: string, graceMs?: number): Promise<ExitResult>;
  /** Resolves when the container has exited (at once if it already has). */
  wait(id: string, signal?: AbortSignal): Promise<ExitResult>;
  /** Every container this runtime manages on this machine, whoever started it. */
  list(): Promise<ManagedContainer[]>;
  /** Takes over a container found by list() (e.g. after an agent restart). */
  adopt(id: string): Promise<ManagedContainer>;
  logs(id: string, options?: LogOptions): AsyncIterable<LogLine>;
  /** Kills it if still running, then deletes its state, cgroups and bundle. Idempotent. */
  remove(id: string): Promise<void>;
}

/** Shape of the pino/Nest-style logger the agent passes in. */
export interface RuntimeLogger {
  debug?(obj: object, msg?: string): void;
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
}

export const silentLogger: RuntimeLogger = {
  info: () => undefined,
  warn: () => undefined,
  error: () => undefined,
};
