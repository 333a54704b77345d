import type { ContainerEdits } from '../oci/container-edits.js';
import type { GpuAssignment } from '../types.js';
import { type CdiSpec, cdiEdits, CDI_DIRS, loadCdiSpecs, NVIDIA_CDI_KIND } from './cdi.js';
import { type HostIo, nodeHostIo } from './device-io.js';
import { discoverNvidia, type NvidiaHost, nvidiaEdits } from './nvidia.js';

export interface GpuInjectorOptions {
  cdiDirs?: string[];
  io?: HostIo;
  arch?: string;
  onCdiError?: (file: string, error: unknown) => void;
}

/**
 * Turns a GPU assignment into config edits: through the machine's NVIDIA CDI spec when
 * /etc/cdi (or /var/run/cdi) has one, which knows the driver's exact files; otherwise from
 * the device nodes and driver libraries found on the host. Discovery runs once.
 */
export class GpuInjector {
  private discovered?: Promise<{ cdi?: CdiSpec; host?: NvidiaHost }>;

  constructor(private readonly options: GpuInjectorOptions = {}) {}

  async edits(assignment: GpuAssignment, mountDriver: boolean): Promise<ContainerEdits> {
    if (!assignment.devices.length) return {};
    const { cdi, host } = await (this.discovered ??= this.discover());
    if (cdi) return cdiEdits(cdi, assignment, this.options.io ?? nodeHostIo);
    if (!host) throw new Error('GPUs were assigned but this machine has no NVIDIA device nodes (/dev/nvidia*)');
    return nvidiaEdits(host, assignment, { mountDriver });
  }

  private async discover(): Promise<{ cdi?: CdiSpec; host?: NvidiaHost }> {
    const io = this.options.io ?? nodeHostIo;
    const specs = await loadCdiSpecs(this.options.cdiDirs ?? CDI_DIRS, io, this.options.onCdiError);
    const cdi = specs.find((s) => s.kind === NVIDIA_CDI_KIND);
    if (cdi) return { cdi };
    return { host: await discoverNvidia(io, this.options.arch) };
  }
}
