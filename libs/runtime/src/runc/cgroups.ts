import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { exists } from '../fs-exists.js';

export interface MemoryEvents {
  /** Processes the OOM killer killed in this cgroup; undefined when the kernel does not say (v1 before 4.13). */
  oomKills?: number;
  /** Times usage hit the limit (cgroup v1 memory.failcnt, v2 `max` events). */
  limitHits?: number;
}

/** Where cgroups live on this machine, read once from /proc/self/mounts. */
export class Cgroups {
  private layout?: Promise<{ v2: boolean; memoryMount?: string }>;

  constructor(private readonly mountsFile = '/proc/self/mounts') {}

  private detect(): Promise<{ v2: boolean; memoryMount?: string }> {
    return (this.layout ??= (async () => {
      const mounts = await readFile(this.mountsFile, 'utf8').catch(() => '');
      let memoryMount: string | undefined;
      let unified: string | undefined;
      for (const line of mounts.split('\n')) {
        const [, mountPoint, type, options] = line.split(' ');
        if (type === 'cgroup' && options?.split(',').includes('memory')) memoryMount = mountPoint;
        if (type === 'cgroup2' && mountPoint === '/sys/fs/cgroup') unified = mountPoint;
      }
      if (memoryMount) return { v2: false, memoryMount };
      return { v2: !!unified, memoryMount: unified };
    })());
  }

  async version(): Promise<1 | 2> {
    return (await this.detect()).v2 ? 2 : 1;
  }

  /** Whether memory+swap can be limited (v1 needs swap accounting: memory.memsw.*). */
  async swapAccounting(): Promise<boolean> {
    const { v2, memoryMount } = await this.detect();
    if (v2) return true;
    if (!memoryMount) return false;
    return exists(join(memoryMount, 'memory.memsw.limit_in_bytes'));
  }

  /**
   * OOM and limit counters of a container's memory cgroup. runc runs with --keep, so the cgroup
   * outlives the container's processes until `runc delete`: this is read in between.
   */
  async memoryEvents(cgroupsPath: string): Promise<MemoryEvents | undefined> {
    const { v2, memoryMount } = await this.detect();
    if (!memoryMount) return undefined;
    const dir = join(memoryMount, cgroupsPath);
    if (v2) {
      const text = await readFile(join(dir, 'memory.events'), 'utf8').catch(() => undefined);
      if (text === undefined) return undefined;
      const events = parseKeyed(text);
      return { oomKills: events.oom_kill, limitHits: events.max };
    }
    const control = await readFile(join(dir, 'memory.oom_control'), 'utf8').catch(() => undefined);
    if (control === undefined) return undefined;
    const failcnt = await readFile(join(dir, 'memory.failcnt'), 'utf8').catch(() => undefined);
    return { oomKills: parseKeyed(control).oom_kill, limitHits: failcnt === undefined ? undefined : Number(failcnt.trim()) };
  }
}

export function parseKeyed(text: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const line of text.split('\n')) {
    const [k, v] = line.trim().split(/\s+/);
    if (k && v !== undefined && /^\d+$/.test(v)) out[k] = Number(v);
  }
  return out;
}

/**
 * Whether the OOM killer ended (part of) the container. The kernel's oom_kill counter is
 * authoritative; without it (old v1 kernels), a SIGKILL exit after the limit was hit is.
 */
export function wasOomKilled(events: MemoryEvents | undefined, exitStatus: number | null): boolean {
  if (!events) return false;
  if (events.oomKills !== undefined) return events.oomKills > 0;
  return exitStatus === 137 && (events.limitHits ?? 0) > 0;
}

/** RLIMIT_NOFILE hard limit of this process: runc cannot give a container more without CAP_SYS_RESOURCE. */
export async function nofileHardLimit(): Promise<number | undefined> {
  const text = await readFile('/proc/self/limits', 'utf8').catch(() => '');
  const m = /^Max open files\s+(\S+)\s+(\S+)/m.exec(text);
  if (!m || m[2] === 'unlimited') return undefined;
  return Number(m[2]);
}
