import { readFile } from 'node:fs/promises';

/** USER_HZ: Linux reports process times in these (100 on every mainstream build). */
const CLOCK_TICKS = 100;

/**
 * Where a process's CPU seconds went: its main thread (the event loop), its other threads (worker
 * threads such as the sha256 ones, libuv's pool doing file writes, V8's helpers), and its
 * children that have ended (tar, zstd, runc). The three add up to `cpuSeconds(pid)`.
 */
export async function cpuSplit(pid: number): Promise<{ main: number; threads: number; children: number }> {
  const fields = async (path: string) => {
    const stat = await readFile(path, 'utf8');
    return stat
      .slice(stat.lastIndexOf(')') + 2)
      .split(' ')
      .map(Number);
  };
  // The process's utime and stime count all its threads, ended ones too; its main thread's task entry counts that thread alone.
  const [own, main] = [await fields(`/proc/${pid}/stat`), await fields(`/proc/${pid}/task/${pid}/stat`)];
  const ticks = (f: number[], at: number) => f[at]! + f[at + 1]!;
  return {
    main: ticks(main, 11) / CLOCK_TICKS,
    threads: (ticks(own, 11) - ticks(main, 11)) / CLOCK_TICKS,
    children: ticks(own, 13) / CLOCK_TICKS,
  };
}
