export * from './types.js';
export * from './errors.js';
export { validateSpec } from './validation.js';
export { buildOciConfig, buildEnv, cpuFor, type OciConfigInput, type UserNamespaceMapping, type VolumeBind } from './oci/config-builder.js';
export type * from './oci/oci-spec.js';
export { applyEdits, mergeEdits, type ContainerEdits } from './oci/container-edits.js';
export { defaultSeccompProfile } from './oci/seccomp.js';
export { GpuInjector, type GpuInjectorOptions } from './gpu/gpu-edits.js';
export { discoverNvidia, nvidiaEdits, gpuEnv, parseLdconfig, type NvidiaHost, NVIDIA_LIB_DIR, NVIDIA_BIN_DIR } from './gpu/nvidia.js';
export { cdiEdits, loadCdiSpecs, type CdiSpec, CDI_DIRS } from './gpu/cdi.js';
export { type HostIo, nodeHostIo } from './gpu/device-io.js';
export { ImageStore, type ImageStoreOptions } from './images/image-store.js';
export { sha256Hex } from './images/digest.js';
export { parseImageRef, HOST_IMAGE, type ParsedImageRef } from './images/image-ref.js';
export type { PreparedImage } from './images/prepared-image.js';
export type { HostImageOptions } from './images/host-image.js';
export { RuncRuntime, type RuncRuntimeOptions, PRIVATE_PORT } from './runc/runc-runtime.js';
export {
  type ExecSpec,
  runcExecArgs,
  EXEC_FILES,
  EXEC_OUTPUT_CHUNK_BYTES,
  SUPERVISED_EXEC_SCRIPT,
  supervisedExecArgs,
} from './runc/runc-exec.js';
export { NerdctlRuntime, type NerdctlRuntimeOptions } from './nerdctl/nerdctl-runtime.js';
export { nerdctlRunArgs } from './nerdctl/nerdctl-args.js';
export { exitFromStatus } from './runc/exit-status.js';
export { reconcile, type ReconcileDecision, type ReconcileOptions, type ReconcileReport } from './reconcile.js';
export { detectRuntime, type DetectRuntimeOptions } from './detect.js';
export { describeCheck, PROBE_INTERVAL, waitForHealth, type WaitForHealthOptions } from './health.js';
export { freePort } from './ports.js';
export { BridgeNetwork, type BridgeNetworkOptions, type Attachment, DEFAULT_BRIDGE, DEFAULT_SUBNET } from './net/bridge-network.js';
export { parseIpv4Cidr, formatNet, NEVER_REACHED, type Ipv4Net } from './net/ipv4.js';
export { parseUpstream, type DnsUpstream } from './net/container-dns.js';
export { parseRegistryRef, pinnedRef, type RegistryRef } from './registry/registry-ref.js';
export { skopeoCopy, resolveRegistryDigest, type RegistryAccess, type RegistryAccessList, type SkopeoOptions } from './registry/skopeo.js';
export { pullRegistryImage, type RegistryPullOptions } from './registry/registry-pull.js';
export { buildBaseImage, BASE_IMAGE_PACKAGES, type BaseImageOptions } from './registry/base-image.js';
export { snapshotImage, type SnapshotImageOptions } from './registry/snapshot-image.js';
export {
  buildImage,
  buildSteps,
  layerKey,
  progressLine,
  type BuildOptions,
  type BuildProgress,
  type BuildResult,
  type BuildStep,
} from './registry/image-builder.js';
