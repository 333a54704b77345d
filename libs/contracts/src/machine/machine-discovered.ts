import { Type } from 'class-transformer';
import {
  ArrayMaxSize,
  IsArray,
  IsIn,
  IsInt,
  IsIP,
  IsObject,
  IsISO8601,
  IsOptional,
  IsString,
  MaxLength,
  Min,
  ValidateNested,
} from 'class-validator';
import { defineContract } from '../contract.js';
import { IsId, IsNullable } from '../validation.js';

/** apple: Apple silicon (Metal / MPS), which shares the machine's memory. */
export const GPU_VENDORS = ['nvidia', 'amd', 'intel', 'apple', 'other'] as const;
export type GpuVendor = (typeof GPU_VENDORS)[number];

/**
 * Bounds on what an inventory may hold. A registration stores the inventory and publishes it as
 * one NATS message (machine.discovered): the largest inventory these bounds allow, every string
 * at its longest and made of characters JSON escapes, must fit NATS' default max_payload of
 * 1 MiB (machine-discovered.spec.ts builds it), so that a too-big inventory is a 400 naming the
 * field, never a message NATS refuses. Each bound is far above what a real machine reports.
 */
export const INVENTORY_LIMITS = {
  /** RFC 1035: a host name is at most 253 characters. */
  hostname: 253,
  /** CPU and GPU model names, OS names and versions. */
  text: 128,
  /** Driver, CUDA and kernel versions, GPU UUIDs, MAC addresses (59 characters for InfiniBand), interface names. */
  shortText: 64,
  /** A disk's mount point. */
  path: 256,
  disks: 64,
  networkInterfaces: 512,
  addressesPerInterface: 4,
  gpus: 64,
} as const;

export class CpuInventory {
  @IsString() @MaxLength(INVENTORY_LIMITS.text) model!: string;
  /** Physical cores. */
  @IsInt() @Min(1) cores!: number;
  /** Logical CPUs (hardware threads), what cpu millicores are measured against. */
  @IsInt() @Min(1) threads!: number;
}

export class DiskInventory {
  @IsString() @MaxLength(INVENTORY_LIMITS.path) mount!: string;
  @IsString() @MaxLength(INVENTORY_LIMITS.shortText) fsType!: string;
  @IsInt() @Min(0) sizeBytes!: number;
  @IsInt() @Min(0) freeBytes!: number;
}

export class OsInventory {
  /** Node's process.platform, e.g. linux. */
  @IsString() @MaxLength(INVENTORY_LIMITS.shortText) platform!: string;
  @IsString() @MaxLength(INVENTORY_LIMITS.text) distro!: string;
  @IsString() @MaxLength(INVENTORY_LIMITS.text) release!: string;
  @IsString() @MaxLength(INVENTORY_LIMITS.text) kernel!: string;
  /** e.g. x64, arm64. */
  @IsString() @MaxLength(INVENTORY_LIMITS.shortText) arch!: string;
}

export class NetworkInterfaceInventory {
  @IsString() @MaxLength(INVENTORY_LIMITS.shortText) name!: string;
  @IsOptional() @IsString() @MaxLength(INVENTORY_LIMITS.shortText) mac?: string;
  @IsArray() @ArrayMaxSize(INVENTORY_LIMITS.addressesPerInterface) @IsIP(undefined, { each: true }) addresses!: string[];
  /** Link speed; null where the kernel does not report it (most virtual NICs). */
  @IsNullable() @IsInt() @Min(0) speedMbps!: number | null;
}

export class GpuInventory {
  @IsInt() @Min(0) index!: number;
  @IsIn(GPU_VENDORS) vendor!: GpuVendor;
  /** Marketing name as the driver reports it, e.g. "NVIDIA H100 80GB HBM3". */
  @IsString() @MaxLength(INVENTORY_LIMITS.text) model!: string;
  @IsInt() @Min(0) memoryMiB!: number;
  @IsString() @MaxLength(INVENTORY_LIMITS.shortText) driverVersion!: string;
  /** Highest CUDA version the driver supports; NVIDIA only. */
  @IsOptional() @IsString() @MaxLength(INVENTORY_LIMITS.shortText) cudaVersion?: string;
  @IsOptional() @IsString() @MaxLength(INVENTORY_LIMITS.shortText) uuid?: string;
}

/** What an agent knows of its machine; sent at registration (HTTP) and on change (NATS). */
export class MachineInventory {
  @IsString() @MaxLength(INVENTORY_LIMITS.hostname) hostname!: string;

  @IsObject()
  @ValidateNested()
  @Type(() => CpuInventory)
  cpu!: CpuInventory;

  @IsInt() @Min(0) memoryBytes!: number;

  @IsArray()
  @ArrayMaxSize(INVENTORY_LIMITS.disks)
  @ValidateNested({ each: true })
  @Type(() => DiskInventory)
  disks!: DiskInventory[];

  @IsObject()
  @ValidateNested()
  @Type(() => OsInventory)
  os!: OsInventory;

  @IsArray()
  @ArrayMaxSize(INVENTORY_LIMITS.networkInterfaces)
  @ValidateNested({ each: true })
  @Type(() => NetworkInterfaceInventory)
  networkInterfaces!: NetworkInterfaceInventory[];

  @IsArray()
  @ArrayMaxSize(INVENTORY_LIMITS.gpus)
  @ValidateNested({ each: true })
  @Type(() => GpuInventory)
  gpus!: GpuInventory[];
}

export class MachineDiscovered extends MachineInventory {
  @IsId() machineId!: string;

  @IsISO8601() discoveredAt!: string;
}

export const MACHINE_DISCOVERED = defineContract({
  subject: 'tern.machine.discovered.v1',
  kind: 'event',
  payload: MachineDiscovered,
  stream: 'EVENTS',
  description:
    "A machine's hardware inventory: CPU, memory, disks, OS, network interfaces, GPUs. Sent by the gateway at every registration: the inventory of the registration call, already stored on the machine row, which is what the scheduler and the machines API read. For consumers that keep their own view (reputation, metering).",
});
