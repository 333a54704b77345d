import { type GpuInventory } from '#tern/contracts';
import { gpu, type GpuProvider, type ProbeContext } from './gpu-provider.js';

export const NVIDIA_QUERY = ['--query-gpu=index,name,memory.total,driver_version,uuid', '--format=csv,noheader,nounits'];

function wholeNumber(text: string | undefined): number {
  const n = Number.parseInt((text ?? '').trim(), 10);
  return Number.isFinite(n) && n >= 0 ? n : 0;
}

/**
 * Parses `nvidia-smi --query-gpu=index,name,memory.total,driver_version,uuid
 * --format=csv,noheader,nounits`. A name with a comma in it keeps its comma: the first field
 * is the index and the last three are memory, driver and uuid.
 */
export function parseNvidiaSmiCsv(csv: string, cudaVersion?: string): GpuInventory[] {
  const out: GpuInventory[] = [];
  for (const line of csv.split(/\r?\n/)) {
    const fields = line.split(',').map((f) => f.trim());
    if (fields.length < 5 || !/^\d+$/.test(fields[0])) continue;
    const [uuid, driverVersion, memory] = [fields.pop()!, fields.pop()!, fields.pop()!];
    const [index, ...name] = fields;
    out.push(
      gpu({
        index: Number(index),
        vendor: 'nvidia',
        model: name.join(', '),
        memoryMiB: wholeNumber(memory),
        driverVersion: driverVersion.startsWith('[') ? '' : driverVersion,
        cudaVersion,
        uuid: uuid.startsWith('GPU-') || uuid.startsWith('MIG-') ? uuid : undefined,
      }),
    );
  }
  return out;
}

/** The highest CUDA version the driver supports, from the banner of plain `nvidia-smi`. */
export function parseCudaVersion(banner: string): string | undefined {
  return /CUDA Version:\s*([\d.]+)/.exec(banner)?.[1];
}

export const nvidiaProvider: GpuProvider = {
  vendor: 'nvidia',
  async detect(ctx: ProbeContext) {
    const csv = await ctx.run('nvidia-smi', NVIDIA_QUERY);
    if (!csv) return [];
    const banner = await ctx.run('nvidia-smi', []);
    return parseNvidiaSmiCsv(csv, banner ? parseCudaVersion(banner) : undefined);
  },
};
