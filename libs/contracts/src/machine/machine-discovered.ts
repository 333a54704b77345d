import { Type } from 'class-transformer';
import { IsArray, IsIn, IsInt, IsIP, IsObject, IsISO8601, IsOptional, IsString, Min, ValidateNested } from 'class-validator';
import { defineContract } from '../contract.js';
import { IsId, IsNullable } from '../validation.js';

/** apple: Apple silicon (Metal / MPS), which shares the machine's memory. */
export const GPU_VENDORS = ['nvidia', 'amd', 'intel', 'apple', 'other'] as const;
export type GpuVendor = (typeof GPU_VENDORS)[number];

export class CpuInventory {
  @IsString() model!: string;
  /** Physical cores. */
  @IsInt() @Min(1) cores!: number;
  /** Logical CPUs (hardware threads), what cpu millicores are measured against. */
  @IsInt() @Min(1) threads!: number;
}

export class DiskInventory {
  @IsString() mount!: string;
  @IsString() fsType!: string;
  @IsInt() @Min(0) sizeBytes!: number;
  @IsInt() @Min(0) freeBytes!: number;
}

export class OsInventory {
  /** Node's process.platform, e.g. linux. */
  @IsString() platform!: string;
  @IsString() distro!: string;
  @IsString() release!: string;
  @IsString() kernel!: string;
  /** e.g. x64, arm64. */
  @IsString() arch!: string;
}

export class NetworkInterfaceInventory {
  @IsString() name!: string;
  @IsOptional() @IsString() mac?: string;
  @IsArray() @IsIP(undefined, { each: true }) addresses!: string[];
  /** Link speed; null where the kernel does not report it (most virtual NICs). */
  @IsNullable() @IsInt() @Min(0) speedMbps!: number | null;
}

export class GpuInventory {
  @IsInt() @Min(0) index!: number;
  @IsIn(GPU_VENDORS) vendor!: GpuVendor;
  /** Marketing name as the driver reports it, e.g. "NVIDIA H100 80GB HBM3". */
  @IsString() model!: string;
  @IsInt() @Min(0) memoryMiB!: number;
  @IsString() driverVersion!: string;
  /** Highest CUDA version the driver supports; NVIDIA only. */
  @IsOptional() @IsString() cudaVersion?: string;
  @IsOptional() @IsString() uuid?: string;
}

/** What an agent knows of its machine; sent at registration (HTTP) and on change (NATS). */
export class MachineInventory {
  @IsString() hostname!: string;

  @IsObject()
  @ValidateNested()
  @Type(() => CpuInventory)
  cpu!: CpuInventory;

  @IsInt() @Min(0) memoryBytes!: number;

  @IsArray()
  @ValidateNested({ each: true })
  @Type(() => DiskInventory)
  disks!: DiskInventory[];

  @IsObject()
  @ValidateNested()
  @Type(() => OsInventory)
  os!: OsInventory;

  @IsArray()
  @ValidateNested({ each: true })
  @Type(() => NetworkInterfaceInventory)
  networkInterfaces!: NetworkInterfaceInventory[];

  @IsArray()
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
