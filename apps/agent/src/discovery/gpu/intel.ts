import { type GpuInventory } from '#tern/contracts';
import { gpu, type GpuProvider, MIB, type ProbeContext } from './gpu-provider.js';

interface XpuDevice {
  device_id?: number;
  device_name?: string;
  uuid?: string;
  memory_physical_size_byte?: string | number;
  driver_version?: string;
}

function parseJson<T>(text: string): T | undefined {
  try {
    return JSON.parse(text) as T;
  } catch {
    return undefined;
  }
}

/** Parses `xpu-smi discovery -j` (the device list) and, per device, `xpu-smi discovery -d N -j`. */
export function parseXpuSmiDiscovery(listJson: string, details: Record<number, string | undefined> = {}): GpuInventory[] {
  const list = parseJson<{ device_list?: XpuDevice[] }>(listJson)?.device_list ?? [];
  return list
    .filter((d) => typeof d.device_id === 'number')
    .map((d) => {
      const detail = details[d.device_id!] ? parseJson<XpuDevice>(details[d.device_id!]!) : undefined;
      const bytes = Number(detail?.memory_physical_size_byte ?? d.memory_physical_size_byte ?? 0);
      return gpu({
        index: d.device_id!,
        vendor: 'intel',
        model: d.device_name ?? detail?.device_name ?? 'Intel GPU',
        memoryMiB: Number.isFinite(bytes) ? Math.floor(bytes / MIB) : 0,
        driverVersion: detail?.driver_version ?? d.driver_version ?? '',
        uuid: d.uuid ?? detail?.uuid,
      });
    });
}

/** Intel's PCI vendor id, and the PCI class of a "3D controller" (data-centre GPUs, not integrated graphics). */
const INTEL_VENDOR = '0x8086';
const PCI_3D_CONTROLLER = '0x0380';

/**
 * Without xpu-smi: Intel 3D controllers under /sys/class/drm. Memory is not reported there,
 * so it is 0 (the scheduler then only places GPU-count requests on it).
 */
export async function intelFromSysfs(ctx: ProbeContext, root = '/sys/class/drm'): Promise<GpuInventory[]> {
  const cards = (await ctx.listDir(root)).filter((n) => /^card\d+$/.test(n)).sort((a, b) => Number(a.slice(4)) - Number(b.slice(4)));
  const out: GpuInventory[] = [];
  for (const card of cards) {
    const vendor = (await ctx.readFile(`${root}/${card}/device/vendor`))?.trim();
    const cls = (await ctx.readFile(`${root}/${card}/device/class`))?.trim();
    if (vendor !== INTEL_VENDOR || !cls?.startsWith(PCI_3D_CONTROLLER)) continue;
    const device = (await ctx.readFile(`${root}/${card}/device/device`))?.trim() ?? '';
    out.push(gpu({ index: out.length, vendor: 'intel', model: `Intel GPU ${device}`.trim(), memoryMiB: 0, driverVersion: '' }));
  }
  return out;
}

export const intelProvider: GpuProvider = {
  vendor: 'intel',
  async detect(ctx: ProbeContext) {
    if (ctx.platform !== 'linux') return [];
    const list = await ctx.run('xpu-smi', ['discovery', '-j']);
    if (!list) return intelFromSysfs(ctx);
    const ids = (parseJson<{ device_list?: XpuDevice[] }>(list)?.device_list ?? [])
      .map((d) => d.device_id)
      .filter((id): id is number => typeof id === 'number');
    const details: Record<number, string | undefined> = {};
    for (const id of ids) details[id] = await ctx.run('xpu-smi', ['discovery', '-d', String(id), '-j']);
    return parseXpuSmiDiscovery(list, details);
  },
};
