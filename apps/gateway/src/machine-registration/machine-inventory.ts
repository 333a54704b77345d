import { type MachineDiscovered, type MachineInventory } from '#tern/contracts';
import { type MachineInventoryColumns } from '#tern/persistence';

const MIB = 1024 * 1024;

/** The registration body's inventory as the machine row keeps it (GPU memory in bytes, like every size there). */
export function inventoryColumns(inv: MachineInventory): MachineInventoryColumns {
  return {
    hostname: inv.hostname,
    cpuModel: inv.cpu.model,
    cpuCores: inv.cpu.cores,
    cpuThreads: inv.cpu.threads,
    memoryBytes: inv.memoryBytes,
    gpus: inv.gpus.map((g) => ({
      index: g.index,
      vendor: g.vendor,
      model: g.model,
      memoryBytes: g.memoryMiB * MIB,
      driverVersion: g.driverVersion,
      ...(g.cudaVersion ? { cudaVersion: g.cudaVersion } : {}),
      ...(g.uuid ? { uuid: g.uuid } : {}),
    })),
    disks: inv.disks.map((d) => ({ mount: d.mount, fsType: d.fsType, sizeBytes: d.sizeBytes, freeBytes: d.freeBytes })),
    os: { platform: inv.os.platform, distro: inv.os.distro, release: inv.os.release, kernel: inv.os.kernel, arch: inv.os.arch },
    interfaces: inv.networkInterfaces.map((n) => ({
      name: n.name,
      ...(n.mac ? { mac: n.mac } : {}),
      addresses: n.addresses,
      speedMbps: n.speedMbps,
    })),
  };
}

/** machine.discovered from a registration: the same inventory, as plain JSON. */
export function discoveredEvent(machineId: string, inv: MachineInventory, at: Date): MachineDiscovered {
  return JSON.parse(JSON.stringify({ machineId, ...inv, discoveredAt: at.toISOString() })) as MachineDiscovered;
}
