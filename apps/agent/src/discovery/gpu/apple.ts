import { type GpuInventory } from '#tern/contracts';
import { gpu, type GpuProvider, MIB, type ProbeContext } from './gpu-provider.js';

type Display = Record<string, unknown>;

/** "8 GB", "1536 MB" → MiB. */
export function parseMacMemory(text: unknown): number {
  const m = /^\s*([\d.]+)\s*(TB|GB|MB)\s*$/i.exec(String(text ?? ''));
  if (!m) return 0;
  const factor = { TB: 1024 * 1024, GB: 1024, MB: 1 }[m[2].toUpperCase() as 'TB' | 'GB' | 'MB'];
  return Math.floor(Number(m[1]) * factor);
}

/** "spdisplays_metal3" → "Metal 3". */
function metalFamily(value: unknown): string {
  const m = /metal(\d+)/i.exec(String(value ?? ''));
  return m ? `Metal ${m[1]}` : '';
}

/**
 * Parses `system_profiler SPDisplaysDataType -json`. Apple silicon GPUs (the MPS backend)
 * share the machine's memory, so they report all of it; a discrete AMD card on an Intel Mac
 * reports its own VRAM. Intel integrated graphics are not offered for compute.
 */
export function parseSystemProfilerDisplays(text: string, totalMemoryBytes: number): GpuInventory[] {
  let doc: { SPDisplaysDataType?: Display[] };
  try {
    doc = JSON.parse(text) as { SPDisplaysDataType?: Display[] };
  } catch {
    return [];
  }
  const out: GpuInventory[] = [];
  for (const d of doc.SPDisplaysDataType ?? []) {
    const model = String(d.sppci_model ?? d._name ?? '');
    const vendorToken = String(d.spdisplays_vendor ?? d.sppci_vendor ?? '').toLowerCase();
    const apple = vendorToken.includes('apple') || /^apple /i.test(model);
    const amd = vendorToken.includes('amd') || vendorToken.includes('ati') || /radeon|amd/i.test(model);
    if (!apple && !amd) continue;
    out.push(
      gpu({
        index: out.length,
        vendor: apple ? 'apple' : 'amd',
        model,
        memoryMiB: apple ? Math.floor(totalMemoryBytes / MIB) : parseMacMemory(d.spdisplays_vram ?? d.spdisplays_vram_shared),
        driverVersion: metalFamily(d.spdisplays_mtlgpufamilysupport ?? d.spdisplays_metal),
      }),
    );
  }
  return out;
}

export const appleProvider: GpuProvider = {
  vendor: 'apple',
  async detect(ctx: ProbeContext) {
    if (ctx.platform !== 'darwin') return [];
    const text = await ctx.run('system_profiler', ['SPDisplaysDataType', '-json'], { timeoutMs: 20_000 });
    return text ? parseSystemProfilerDisplays(text, ctx.totalMemoryBytes) : [];
  },
};
