/**
 * The subset of the OCI runtime spec (v1.0.2, what runc 1.1 reads) that Tern writes. Field
 * names follow the spec exactly: this object is serialised as the bundle's config.json.
 */

export interface OciMount {
  destination: string;
  type?: string;
  source?: string;
  options?: string[];
}

export interface OciUser {
  uid: number;
  gid: number;
  additionalGids?: number[];
}

export interface OciCapabilities {
  bounding: string[];
  effective: string[];
  permitted: string[];
  inheritable: string[];
  ambient: string[];
}

export interface OciRlimit {
  type: string;
  hard: number;
  soft: number;
}

export interface OciProcess {
  terminal: boolean;
  user: OciUser;
  args: string[];
  env: string[];
  cwd: string;
  capabilities: OciCapabilities;
  rlimits: OciRlimit[];
  noNewPrivileges: boolean;
}

export interface OciDevice {
  path: string;
  type: 'c' | 'b' | 'u' | 'p';
  major: number;
  minor: number;
  fileMode?: number;
  uid?: number;
  gid?: number;
}

export interface OciDeviceCgroupRule {
  allow: boolean;
  type?: 'a' | 'c' | 'b';
  major?: number;
  minor?: number;
  access?: string;
}

export interface OciResources {
  devices: OciDeviceCgroupRule[];
  memory?: { limit?: number; swap?: number };
  cpu?: { shares?: number; quota?: number; period?: number };
  pids?: { limit: number };
}

export interface OciNamespace {
  type: 'pid' | 'network' | 'mount' | 'ipc' | 'uts' | 'user' | 'cgroup';
  path?: string;
}

export interface OciSeccompArg {
  index: number;
  value: number;
  valueTwo?: number;
  op: string;
}

export interface OciSeccompSyscall {
  names: string[];
  action: string;
  errnoRet?: number;
  args?: OciSeccompArg[];
}

export interface OciSeccomp {
  defaultAction: string;
  defaultErrnoRet?: number;
  architectures: string[];
  syscalls: OciSeccompSyscall[];
}

export interface OciHook {
  path: string;
  args?: string[];
  env?: string[];
  timeout?: number;
}

export interface OciHooks {
  prestart?: OciHook[];
  createRuntime?: OciHook[];
  createContainer?: OciHook[];
  startContainer?: OciHook[];
  poststart?: OciHook[];
  poststop?: OciHook[];
}

export interface OciIdMapping {
  containerID: number;
  hostID: number;
  size: number;
}

export interface OciLinux {
  namespaces: OciNamespace[];
  uidMappings?: OciIdMapping[];
  gidMappings?: OciIdMapping[];
  resources: OciResources;
  cgroupsPath: string;
  devices?: OciDevice[];
  seccomp?: OciSeccomp;
  maskedPaths: string[];
  readonlyPaths: string[];
}

export interface OciSpec {
  ociVersion: string;
  process: OciProcess;
  root: { path: string; readonly: boolean };
  hostname: string;
  mounts: OciMount[];
  hooks?: OciHooks;
  linux: OciLinux;
  annotations: Record<string, string>;
}
