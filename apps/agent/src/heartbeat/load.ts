import * as si from 'systeminformation';

export interface Load {
  cpuPercent: number;
  memoryPercent: number;
}

const clamp = (n: number) => Math.round(Math.min(100, Math.max(0, Number.isFinite(n) ? n : 0)) * 10) / 10;

/** Memory in use counts what the kernel could not hand out right now (total − available), not its caches. */
export function memoryPercent(mem: { total: number; available: number }): number {
  return mem.total > 0 ? clamp(((mem.total - mem.available) / mem.total) * 100) : 0;
}

/** CPU use since the previous call (systeminformation keeps the last /proc/stat sample), and memory use now. */
export async function sampleLoad(): Promise<Load> {
  const [load, mem] = await Promise.all([si.currentLoad(), si.mem()]);
  return { cpuPercent: clamp(load.currentLoad), memoryPercent: memoryPercent(mem) };
}
