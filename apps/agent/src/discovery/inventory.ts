import { hostname } from 'node:os';
import * as si from 'systeminformation';
import {
  type CpuInventory,
  type DiskInventory,
  type GpuInventory,
  type MachineInventory,
  type NetworkInterfaceInventory,
  INVENTORY_LIMITS,
  type OsInventory,
} from '#tern/contracts';
import { detectGpus, probeContext } from './gpu/index.js';

/** File systems that are not disks a container could use (pseudo, overlay, read-only images). */
const SKIP_FS = /^(overlay|tmpfs|devtmpfs|squashfs|proc|sysfs|cgroup2?|autofs|nsfs|fuse\..*|ramfs|efivarfs)$/i;

export function toCpu(cpu: Pick<si.Systeminformation.CpuData, 'manufacturer' | 'brand' | 'physicalCores' | 'cores'>): CpuInventory {
  const brand = cpu.brand?.trim() ?? '';
  const manufacturer = cpu.manufacturer?.trim() ?? '';
  const model = brand.toLowerCase().startsWith(manufacturer.toLowerCase()) ? brand : `${manufacturer} ${brand}`.trim();
  const threads = Math.max(1, cpu.cores || 1);
  return { model: model || 'unknown', cores: Math.max(1, cpu.physicalCores || threads), threads };
}

export function toDisks(fs: Pick<si.Systeminformation.FsSizeData, 'mount' | 'type' | 'size' | 'available'>[]): DiskInventory[] {
  const seen = new Set<string>();
  return fs
    .filter((d) => d.mount && !SKIP_FS.test(d.type ?? '') && d.size > 0)
    .filter((d) => !seen.has(d.mount) && seen.add(d.mount))
    .map((d) => ({
      mount: d.mount,
      fsType: d.type ?? '',
      sizeBytes: Math.max(0, Math.round(d.size)),
      freeBytes: Math.max(0, Math.round(d.available ?? 0)),
    }));
}

/** IPv6 link-local addresses carry a zone (`fe80::1%eth0`) that is no part of the address. */
function bareAddress(a: string | undefined): string | undefined {
  const bare = a?.split('%')[0].trim();
  return bare ? bare : undefined;
}

/**
 * The machine's own network interfaces. Virtual ones (veths, bridges, tunnels: under
 * /sys/devices/virtual) come and go with containers: listed, they changed the inventory at every
 * container start and a busy machine passed the registration limit. They are kept only where the
 * machine has no other (a node inside a container or a network namespace), and then only those
 * with an address.
 */
export function toInterfaces(
  nics: Pick<si.Systeminformation.NetworkInterfacesData, 'iface' | 'mac' | 'ip4' | 'ip6' | 'speed' | 'internal' | 'virtual'>[],
): NetworkInterfaceInventory[] {
  const external = nics.filter((n) => !n.internal);
  const physical = external.filter((n) => !n.virtual);
  const kept = physical.length ? physical : external.filter((n) => n.ip4 || n.ip6);
  return kept.slice(0, INVENTORY_LIMITS.networkInterfaces).map((n) => {
    const out: NetworkInterfaceInventory = {
      name: n.iface,
      addresses: [bareAddress(n.ip4), bareAddress(n.ip6)].filter((a): a is string => !!a),
      speedMbps: typeof n.speed === 'number' && n.speed > 0 ? Math.round(n.speed) : null,
    };
    if (n.mac && n.mac !== '00:00:00:00:00:00') out.mac = n.mac;
    return out;
  });
}

export function toOs(os: Pick<si.Systeminformation.OsData, 'platform' | 'distro' | 'release' | 'kernel' | 'arch'>): OsInventory {
  return {
    platform: process.platform,
    distro: os.distro || os.platform,
    release: os.release ?? '',
    kernel: os.kernel ?? '',
    arch: os.arch || process.arch,
  };
}

export interface DiscoverOptions {
  onGpuError?: (vendor: string, e: Error) => void;
  /** Replaces GPU detection (tests). */
  gpus?: (totalMemoryBytes: number) => Promise<GpuInventory[]>;
}

/** The machine as the agent reports it at registration and in MACHINE_DISCOVERED. */
export async function discoverInventory(opts: DiscoverOptions = {}): Promise<MachineInventory> {
  const [cpu, mem, fs, os, nics] = await Promise.all([
    si.cpu(),
    si.mem(),
    si.fsSize().catch(() => []),
    si.osInfo(),
    si.networkInterfaces().catch(() => []),
  ]);
  const gpus = opts.gpus ? await opts.gpus(mem.total) : await detectGpus(probeContext(mem.total), undefined, opts.onGpuError);
  return {
    hostname: hostname(),
    cpu: toCpu(cpu),
    memoryBytes: mem.total,
    disks: toDisks(fs),
    os: toOs(os),
    networkInterfaces: toInterfaces(Array.isArray(nics) ? nics : [nics]),
    gpus,
  };
}

/**
 * What counts as a change worth a MACHINE_DISCOVERED: hardware, not the free space on disks,
 * which moves all the time.
 */
export function inventoryFingerprint(inv: MachineInventory): string {
  return JSON.stringify({ ...inv, disks: inv.disks.map(({ freeBytes: _free, ...d }) => d) });
}
