import type { PreparedImage } from '../images/prepared-image.js';
import { ANNOTATION } from '../runc/bundle.js';
import { exitFromStatus } from '../runc/exit-status.js';
import type { ContainerSpec, ContainerStatus, ExitResult, ManagedContainer, UserSpec } from '../types.js';

export interface NerdctlRunInput {
  spec: ContainerSpec;
  image: PreparedImage;
  /** Final `KEY=value` list (buildEnv()). */
  env: string[];
  args: string[];
  user: UserSpec;
  port?: number;
  volumes: { source: string; destination: string; readOnly: boolean }[];
  created: string;
  nofile: number;
  tmpBytes: number;
  shmBytes: number;
}

/** `--gpus` as docker/nerdctl read it: a CSV field, so a list of devices is quoted. */
export function gpusFlag(spec: ContainerSpec): string | undefined {
  const devices = spec.gpus?.devices ?? [];
  if (!devices.length) return undefined;
  const ids = devices.map((d) => d.uuid ?? String(d.index));
  return ids.length === 1 ? `device=${ids[0]}` : `"device=${ids.join(',')}"`;
}

/**
 * `nerdctl run -d …` for a prepared image, with the same defaults as the runc config:
 * read-only rootfs with tmpfs /tmp, no capabilities, no-new-privileges, containerd's default
 * seccomp profile (nerdctl applies it), host networking with $PORT, limits, labels that mark
 * it Tern's. The unpacked rootfs is passed with --rootfs, so both runtimes share ImageStore.
 */
export function nerdctlRunArgs(input: NerdctlRunInput): string[] {
  const { spec, image } = input;
  const args = ['run', '-d', '--name', spec.id];
  const labels: Record<string, string> = {
    [ANNOTATION.managed]: 'true',
    [ANNOTATION.image]: image.ref,
    [ANNOTATION.imageDigest]: image.digest,
    [ANNOTATION.labels]: JSON.stringify(spec.labels ?? {}),
    ...(input.port !== undefined ? { [ANNOTATION.port]: String(input.port) } : {}),
    [ANNOTATION.created]: input.created,
  };
  for (const [k, v] of Object.entries(labels)) args.push('--label', `${k}=${v}`);
  args.push('--network', spec.network ?? 'host');
  args.push('--user', `${input.user.uid}:${input.user.gid}`);
  args.push('--read-only', '--tmpfs', `/tmp:rw,nosuid,nodev,mode=1777,size=${input.tmpBytes}`, '--shm-size', String(input.shmBytes));
  args.push('--security-opt', 'no-new-privileges', '--cap-drop', 'ALL');
  args.push('--ulimit', `nofile=${input.nofile}:${input.nofile}`);
  if (spec.memoryBytes) args.push('--memory', String(spec.memoryBytes), '--memory-swap', String(spec.memoryBytes));
  if (spec.cpuMillicores) args.push('--cpus', (spec.cpuMillicores / 1000).toFixed(3));
  if (spec.pidsLimit) args.push('--pids-limit', String(spec.pidsLimit));
  args.push('-w', spec.cwd ?? image.cwd ?? '/');
  for (const e of input.env) args.push('-e', e);
  for (const m of image.mounts) {
    if (m.type === 'bind' && m.source) args.push('-v', `${m.source}:${m.destination}:ro`);
  }
  for (const v of input.volumes) args.push('-v', `${v.source}:${v.destination}:${v.readOnly ? 'ro' : 'rw'}`);
  const gpus = gpusFlag(spec);
  if (gpus) args.push('--gpus', gpus);
  args.push('--rootfs', image.rootfs, ...input.args);
  return args;
}

/** The docker-compatible `nerdctl inspect` fields Tern reads. */
export interface NerdctlInspect {
  Id: string;
  Name: string;
  Created?: string;
  State: {
    Status: string;
    Running: boolean;
    Paused?: boolean;
    OOMKilled?: boolean;
    Pid?: number;
    ExitCode?: number;
    FinishedAt?: string;
  };
  Config?: { Labels?: Record<string, string> };
}

const STATUS: Record<string, ContainerStatus> = {
  created: 'creating',
  running: 'running',
  paused: 'paused',
  pausing: 'paused',
  exited: 'stopped',
  stopped: 'stopped',
};

export function exitFromInspect(i: NerdctlInspect): ExitResult {
  return {
    ...exitFromStatus(i.State.ExitCode ?? null),
    oomKilled: !!i.State.OOMKilled,
    finishedAt: i.State.FinishedAt && !i.State.FinishedAt.startsWith('0001') ? i.State.FinishedAt : new Date().toISOString(),
  };
}

/** A Tern-managed container from inspect output; undefined when it is not Tern's. */
export function managedFromInspect(i: NerdctlInspect): ManagedContainer | undefined {
  const labels = i.Config?.Labels ?? {};
  if (labels[ANNOTATION.managed] !== 'true') return undefined;
  let userLabels: Record<string, string> = {};
  try {
    userLabels = JSON.parse(labels[ANNOTATION.labels] ?? '{}') as Record<string, string>;
  } catch {
    // Leave them empty: still Tern's container.
  }
  const status = STATUS[i.State.Status] ?? 'unknown';
  const port = labels[ANNOTATION.port] ? Number(labels[ANNOTATION.port]) : undefined;
  return {
    id: i.Name.replace(/^\//, ''),
    runtime: 'nerdctl',
    image: { ref: labels[ANNOTATION.image] ?? '', digest: labels[ANNOTATION.imageDigest] ?? '' },
    labels: userLabels,
    ...(port !== undefined ? { port } : {}),
    ...(i.State.Pid ? { pid: i.State.Pid } : {}),
    startedAt: labels[ANNOTATION.created] ?? i.Created ?? '',
    status,
    ...(status === 'stopped' ? { exit: exitFromInspect(i) } : {}),
  };
}

const LOG_LINE = /^(\d{4}-\d{2}-\d{2}T\S+)\s(.*)$/s;

/** A `nerdctl logs -t` line: RFC 3339 timestamp, a space, the text. */
export function parseTimestamped(line: string): { time: Date; line: string } {
  const m = LOG_LINE.exec(line);
  const time = m ? new Date(m[1]!) : undefined;
  return time && !Number.isNaN(time.getTime()) ? { time, line: m![2]! } : { time: new Date(), line };
}
