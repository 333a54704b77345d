import { randomBytes } from 'node:crypto';
import { readFile, rename, stat, writeFile } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { ContainerNotFoundError } from '../errors.js';
import type { ExitResult, RuntimeLogger } from '../types.js';
import type { Bundle } from './bundle.js';
import { type Cgroups, wasOomKilled } from './cgroups.js';
import { exitFromStatus } from './exit-status.js';
import type { RuncCli } from './runc-cli.js';
import { exists } from '../fs-exists.js';

const POLL_MS = 100;

/**
 * How a container's end is known: the shim writes runc's exit status to the bundle's exit file;
 * the first reader works out the ExitResult from it and the cgroup (an OOM kill) and saves it,
 * so every later caller (wait, list, logs, an agent restarted) reads the same. A shim gone
 * without writing one (killed with the agent's cgroup) leaves an exit whose status is lost.
 */
export class ContainerExits {
  private readonly recording = new Map<string, Promise<ExitResult>>();

  constructor(private readonly deps: { bundle: (id: string) => Bundle; runc: RuncCli; cgroups: Cgroups; log: RuntimeLogger }) {}

  /** The ExitResult once the container has exited: saved, or worked out from the shim's exit file and the cgroup. */
  async result(id: string): Promise<ExitResult | undefined> {
    const bundle = this.deps.bundle(id);
    const saved = await readFile(bundle.resultFile, 'utf8').catch(() => undefined);
    if (saved !== undefined) return JSON.parse(saved) as ExitResult;
    const status = await readFile(bundle.exitFile, 'utf8').catch(() => undefined);
    if (status === undefined) return undefined;
    return this.record(id, Number(status.trim()));
  }

  /** Works out and saves the ExitResult once, however many callers (wait, list, logs) ask at the same time. */
  private record(id: string, status: number | null): Promise<ExitResult> {
    let p = this.recording.get(id);
    if (!p) {
      p = this.compute(id, status).finally(() => this.recording.delete(id));
      this.recording.set(id, p);
    }
    return p;
  }

  private async compute(id: string, status: number | null): Promise<ExitResult> {
    const bundle = this.deps.bundle(id);
    const saved = await readFile(bundle.resultFile, 'utf8').catch(() => undefined);
    if (saved !== undefined) return JSON.parse(saved) as ExitResult;
    const config = await bundle.readConfig();
    const events = config ? await this.deps.cgroups.memoryEvents(config.linux.cgroupsPath) : undefined;
    const result: ExitResult = {
      ...exitFromStatus(status),
      oomKilled: wasOomKilled(events, status),
      // The shim wrote the exit file as runc returned: that is when it finished.
      finishedAt: ((await stat(bundle.exitFile).catch(() => undefined))?.mtime ?? new Date()).toISOString(),
    };
    const tmp = `${bundle.resultFile}.${randomBytes(4).toString('hex')}.tmp`;
    await writeFile(tmp, JSON.stringify(result));
    await rename(tmp, bundle.resultFile);
    this.deps.log.info({ containerId: id, ...result }, 'container exited');
    return result;
  }

  async shimAlive(id: string): Promise<boolean> {
    const bundle = this.deps.bundle(id);
    const pid = Number((await readFile(bundle.shimPidFile, 'utf8').catch(() => '')).trim());
    if (!pid) return false;
    const cmdline = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '');
    return cmdline.includes('tern-shim') && cmdline.includes(bundle.dir);
  }

  /**
   * The exit of a container whose shim is gone without writing an exit status (killed along
   * with the agent's cgroup, say): known once runc says it has stopped; its status is lost.
   */
  async lost(id: string): Promise<ExitResult | undefined> {
    if (await this.shimAlive(id)) return undefined;
    const known = await this.result(id); // the shim may have finished just now
    if (known) return known;
    const state = await this.deps.runc.state(id).catch(() => undefined);
    if (state && state.status !== 'stopped') return undefined;
    return this.record(id, null);
  }

  async wait(id: string, signal?: AbortSignal): Promise<ExitResult> {
    if (!(await exists(this.deps.bundle(id).dir))) throw new ContainerNotFoundError(id);
    for (let i = 0; ; i++) {
      const done = (await this.result(id)) ?? (i % 10 === 9 ? await this.lost(id) : undefined);
      if (done) return done;
      await sleep(POLL_MS, undefined, { signal });
    }
  }

  /** wait() bounded by a timeout: undefined when it has not exited by then. */
  async waitAtMost(id: string, ms: number): Promise<ExitResult | undefined> {
    try {
      return await this.wait(id, AbortSignal.timeout(ms));
    } catch (e) {
      if ((e as Error).name === 'AbortError' || (e as Error).name === 'TimeoutError') return undefined;
      throw e;
    }
  }
}
