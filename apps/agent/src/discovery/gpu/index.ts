import { readdir, readFile } from 'node:fs/promises';
import { type GpuInventory } from '#tern/contracts';
import { type CommandRunner, runCommand } from '../command.js';
import { amdProvider } from './amd.js';
import { appleProvider } from './apple.js';
import { type GpuProvider, type ProbeContext } from './gpu-provider.js';
import { intelProvider } from './intel.js';
import { nvidiaProvider } from './nvidia.js';

export * from './gpu-provider.js';

export const GPU_PROVIDERS: readonly GpuProvider[] = [nvidiaProvider, amdProvider, intelProvider, appleProvider];

export function probeContext(totalMemoryBytes: number, run: CommandRunner = runCommand): ProbeContext {
  return {
    run,
    platform: process.platform,
    totalMemoryBytes,
    readFile: (path) => readFile(path, 'utf8').catch(() => undefined),
    listDir: (path) => readdir(path).catch(() => []),
  };
}

/** Every provider's GPUs; one that fails counts as none, with the reason handed to onError. */
export async function detectGpus(
  ctx: ProbeContext,
  providers: readonly GpuProvider[] = GPU_PROVIDERS,
  onError: (vendor: string, e: Error) => void = () => undefined,
): Promise<GpuInventory[]> {
  const found = await Promise.all(
    providers.map((p) =>
      p.detect(ctx).catch((e: Error) => {
        onError(p.vendor, e);
        return [] as GpuInventory[];
      }),
    ),
  );
  return found.flat();
}
