import { join } from 'node:path';
import { execa } from 'execa';
import { ContainerRuntimeError } from './errors.js';
import type { GpuInjector } from './gpu/gpu-edits.js';
import type { ImageStore } from './images/image-store.js';
import { NerdctlRuntime } from './nerdctl/nerdctl-runtime.js';
import { RuncRuntime } from './runc/runc-runtime.js';
import type { UserNamespaceMapping } from './oci/config-builder.js';
import type { BridgeNetwork } from './net/bridge-network.js';
import type { ContainerRuntime, RuntimeKind, RuntimeLogger } from './types.js';

export interface DetectRuntimeOptions {
  /** nerdctl is used only when asked for and installed; runc otherwise. */
  prefer?: RuntimeKind;
  stateDir: string;
  images: ImageStore;
  volumeRoot?: string;
  logger?: RuntimeLogger;
  gpu?: GpuInjector;
  runc?: string;
  nerdctl?: string;
  /** runc only: each container in its own user namespace where the host allows (RuncRuntimeOptions). */
  userNamespace?: UserNamespaceMapping;
  /** runc only: the bridge for containers asking for a private network. */
  network?: BridgeNetwork;
}

async function installed(binary: string): Promise<boolean> {
  const r = await execa(binary, ['--version'], { reject: false, stdin: 'ignore' });
  return r.exitCode === 0;
}

export async function detectRuntime(options: DetectRuntimeOptions): Promise<ContainerRuntime> {
  const runc = options.runc ?? 'runc';
  const nerdctl = options.nerdctl ?? 'nerdctl';
  const volumeRoot = options.volumeRoot ?? join(options.stateDir, 'volumes');
  const useNerdctl = () =>
    new NerdctlRuntime({ images: options.images, binary: nerdctl, volumeRoot, ...(options.logger ? { logger: options.logger } : {}) });
  if (options.prefer === 'nerdctl' && (await installed(nerdctl))) return useNerdctl();
  if (await installed(runc)) {
    return new RuncRuntime({
      stateDir: options.stateDir,
      images: options.images,
      volumeRoot,
      runc,
      ...(options.logger ? { logger: options.logger } : {}),
      ...(options.gpu ? { gpu: options.gpu } : {}),
      ...(options.userNamespace ? { userNamespace: options.userNamespace } : {}),
      ...(options.network ? { network: options.network } : {}),
    });
  }
  if (await installed(nerdctl)) return useNerdctl();
  throw new ContainerRuntimeError('no container runtime: install runc (or nerdctl)');
}
