import { type GpuInventory } from '#tern/contracts';
import { gpu, type GpuProvider, MIB, type ProbeContext } from './gpu-provider.js';

export const ROCM_SMI_ARGS = ['--showproductname', '--showmeminfo', 'vram', '--showdriverversion', '--json'];

type Fields = Record<string, unknown>;

/** Field names changed case between ROCm releases ("Card series" / "Card Series"). */
function field(card: Fields, ...names: string[]): string | undefined {
  for (const name of names) {
    const hit = Object.entries(card).find(([k]) => k.toLowerCase() === name.toLowerCase());
    if (hit && hit[1] !== undefined && hit[1] !== null && String(hit[1]).trim() !== '' && String(hit[1]) !== 'N/A')
      return String(hit[1]).trim();
  }
  return undefined;
}

/**
 * Parses `rocm-smi --showproductname --showmeminfo vram --showdriverversion --json`: one
 * object per `cardN` plus a `system` object with the driver version. Older releases print
 * warnings around the JSON, so only the outermost braces are read.
 */
export function parseRocmSmiJson(text: string): GpuInventory[] {
  const start = text.indexOf('{');
  const end = text.lastIndexOf('}');
  if (start < 0 || end <= start) return [];
  let doc: Record<string, Fields>;
  try {
    doc = JSON.parse(text.slice(start, end + 1)) as Record<string, Fields>;
  } catch {
    return [];
  }
  const driverVersion = field(doc.system ?? {}, 'Driver version') ?? '';
  const out: GpuInventory[] = [];
  for (const [key, card] of Object.entries(doc)) {
    const m = /^card(\d+)$/.exec(key);
    if (!m || typeof card !== 'object' || card === null) continue;
    const bytes = Number(field(card, 'VRAM Total Memory (B)') ?? 0);
    out.push(
      gpu({
        index: Number(m[1]),
        vendor: 'amd',
        model: field(card, 'Card Series', 'Device Name', 'Card Model', 'Card SKU') ?? 'AMD GPU',
        memoryMiB: Number.isFinite(bytes) ? Math.floor(bytes / MIB) : 0,
        driverVersion,
        uuid: field(card, 'Unique ID', 'GUID'),
      }),
    );
  }
  return out.sort((a, b) => a.index - b.index);
}

export const amdProvider: GpuProvider = {
  vendor: 'amd',
  async detect(ctx: ProbeContext) {
    const text = await ctx.run('rocm-smi', ROCM_SMI_ARGS);
    return text ? parseRocmSmiJson(text) : [];
  },
};
