import { type GpuInventory, type GpuVendor } from '#tern/contracts';
import { type CommandRunner } from '../command.js';

/** What a provider may use to look for devices; tests replace each part with fixtures. */
export interface ProbeContext {
  run: CommandRunner;
  platform: NodeJS.Platform;
  /** Unified-memory GPUs (Apple) report the machine's memory as theirs. */
  totalMemoryBytes: number;
  /** Reads a file (sysfs); undefined when it does not exist. */
  readFile(path: string): Promise<string | undefined>;
  listDir(path: string): Promise<string[]>;
}

/**
 * One vendor's way of finding GPUs. `index` in what it returns is the vendor's own device
 * index (what CUDA_VISIBLE_DEVICES, ROCR_VISIBLE_DEVICES or ZE_AFFINITY_MASK take), so on a
 * mixed-vendor machine a GPU is known by vendor and index together.
 */
export interface GpuProvider {
  readonly vendor: GpuVendor;
  detect(ctx: ProbeContext): Promise<GpuInventory[]>;
}

export const MIB = 1024 * 1024;

export function gpu(fields: Omit<GpuInventory, never>): GpuInventory {
  const out: GpuInventory = {
    index: fields.index,
    vendor: fields.vendor,
    model: fields.model,
    memoryMiB: fields.memoryMiB,
    driverVersion: fields.driverVersion,
  };
  if (fields.cudaVersion) out.cudaVersion = fields.cudaVersion;
  if (fields.uuid) out.uuid = fields.uuid;
  return out;
}
