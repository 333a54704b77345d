/** A container's allotment, as `container.started` carries it. */
export interface MeteredResources {
  readonly cpuMillicores: number;
  readonly memoryBytes: number;
  readonly gpuCount: number;
}

export interface ResourceSeconds {
  readonly gpuSeconds: number;
  readonly cpuCoreSeconds: number;
  readonly memoryGibSeconds: number;
}

const GIB = 2 ** 30;

/** What `seconds` of holding `r` amounts to: GPU-seconds, CPU-core-seconds and GiB-seconds. */
export function resourceSeconds(seconds: number, r: MeteredResources): ResourceSeconds {
  return {
    gpuSeconds: seconds * r.gpuCount,
    cpuCoreSeconds: (seconds * r.cpuMillicores) / 1000,
    memoryGibSeconds: (seconds * r.memoryBytes) / GIB,
  };
}

/** The part of [periodStart, periodEnd) inside [from, to), in seconds; usage is even across a slice. */
export function overlapSeconds(periodStart: number, periodEnd: number, from: number, to: number): number {
  return Math.max(0, Math.min(periodEnd, to) - Math.max(periodStart, from)) / 1000;
}
