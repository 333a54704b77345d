/** What one container asks for, from the deployment version's resolved spec. */
export interface PlacementRequest {
  readonly cpuMillicores: number;
  readonly memoryBytes: number;
  /** GPU types in order of preference; empty with gpuCount > 0 means any type. */
  readonly gpuTypes: readonly string[];
  readonly gpuCount: number;
  readonly pool: string;
  /** Machines with a score below this are skipped; machines without a score pass. */
  readonly minReputation?: number;
  /** The image (`host/repo@sha256:…`): machines that hold it already are preferred (no pull). */
  readonly image?: string;
  /**
   * Only machines whose hardware passed its challenge (verification `verified`): what a workload
   * with secrets, volumes or a private image asks for unless it says otherwise (trustTier).
   */
  readonly verified?: boolean;
}

export interface MachineGpuView {
  readonly index: number;
  readonly model: string;
}

/** What a machine can give: its whole size, before the system's headroom is kept back. */
export interface MachineCapacity {
  /** Logical CPUs × 1000. */
  readonly cpuMillicores: number;
  readonly memoryBytes: number;
  readonly gpus: readonly MachineGpuView[];
}

/** What the machine's active containers (scheduled, starting, running, stopping) hold. */
export interface MachineUsage {
  readonly cpuMillicores: number;
  readonly memoryBytes: number;
  readonly gpuIndexes: readonly number[];
}

export interface MachineView {
  readonly id: string;
  readonly pool: string;
  readonly state: string;
  readonly capacity: MachineCapacity;
  readonly used: MachineUsage;
  /** 0 to 1; absent until the reputation service has scored it. */
  readonly reputation?: number;
  /** Whether the machine holds the request's image (a container of it started there). */
  readonly holdsImage?: boolean;
  /** What its hardware challenge found (libs/proof); absent: unverified. Quarantined machines get nothing. */
  readonly verification?: 'unverified' | 'verified' | 'quarantined';
}

export interface PlacementOptions {
  /** Memory kept for the OS, the agent and the runtime: the larger of this share … */
  readonly memoryHeadroomFraction: number;
  /** … and this many bytes (but never more than half the machine). */
  readonly memoryHeadroomBytes: number;
}

/**
 * 10 % or 512 MiB of memory, whichever is larger, stays with the system: a container that
 * fills the last byte gets the machine's own processes OOM-killed. CPU keeps no headroom: it
 * is shared by time slices, so an over-busy machine slows down instead of failing.
 */
export const DEFAULT_PLACEMENT_OPTIONS: PlacementOptions = {
  memoryHeadroomFraction: 0.1,
  memoryHeadroomBytes: 512 * 2 ** 20,
};

export interface Placed {
  readonly machineId: string;
  /** The GPUs reserved for the container, lowest indexes first; empty without GPUs. */
  readonly gpuIndexes: number[];
  /** The requested type the GPUs matched ("A100"), or their model when any type would do. */
  readonly gpuType?: string;
}

export interface Unplaced {
  /** The binding constraint in words, for `tern deployments` and the logs. */
  readonly reason: string;
}

export type PlacementResult = Placed | Unplaced;

export function isPlaced(result: PlacementResult): result is Placed {
  return 'machineId' in result;
}
