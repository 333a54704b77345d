import { readdirSync, readFileSync } from 'node:fs';

/** A container's first process on this host: Tern's Python runner, with its environment. */
export interface ContainerInit {
  readonly pid: number;
  readonly env: Record<string, string>;
}

/**
 * The Python runner processes that are a container's first process (their parent is no runner;
 * forked workers are left out), read from /proc: what the host sees, independent of Tern's own
 * records. TERN_DEPLOYMENT_ID and TERN_MACHINE_ID in `env` say whose they are.
 */
export function containerInits(): ContainerInit[] {
  const runners = new Map<number, { ppid: number; environ: string }>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (!readFileSync(`/proc/${entry}/cmdline`, 'utf8').includes('tern_runner.py')) continue;
      const ppid = Number(/^\d+ \(.*\) \S+ (\d+)/.exec(readFileSync(`/proc/${entry}/stat`, 'utf8'))?.[1]);
      runners.set(Number(entry), { ppid, environ: readFileSync(`/proc/${entry}/environ`, 'utf8') });
    } catch {
      // gone meanwhile
    }
  }
  return [...runners]
    .filter(([, r]) => !runners.has(r.ppid))
    .map(([pid, r]) => ({
      pid,
      env: Object.fromEntries(
        r.environ
          .split('\0')
          .filter(Boolean)
          .map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]),
      ),
    }));
}
