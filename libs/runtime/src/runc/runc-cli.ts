import { execa } from 'execa';

/** `runc state` / `runc list --format json` entry. */
export interface RuncState {
  id: string;
  pid: number;
  status: 'creating' | 'created' | 'running' | 'pausing' | 'paused' | 'stopped';
  bundle: string;
  created: string;
  annotations?: Record<string, string>;
}

const NOT_FOUND = /does not exist|not found|no such file/i;
const NOT_RUNNING = /not running|process already finished|container not running|no such process/i;

/** runc, always under Tern's own state root so `list` sees only Tern's containers. */
export class RuncCli {
  constructor(
    readonly binary: string,
    readonly root: string,
  ) {}

  private run(args: string[]) {
    return execa(this.binary, ['--root', this.root, ...args], { reject: false, stdin: 'ignore' });
  }

  async state(id: string): Promise<RuncState | undefined> {
    const r = await this.run(['state', id]);
    if (r.exitCode === 0) return JSON.parse(r.stdout) as RuncState;
    if (NOT_FOUND.test(r.stderr)) return undefined;
    throw new Error(`runc state ${id}: ${r.stderr.trim() || r.message}`);
  }

  async list(): Promise<RuncState[]> {
    const r = await this.run(['list', '--format', 'json']);
    if (r.exitCode !== 0) {
      if (NOT_FOUND.test(r.stderr)) return [];
      throw new Error(`runc list: ${r.stderr.trim() || r.message}`);
    }
    return (JSON.parse(r.stdout || 'null') as RuncState[] | null) ?? [];
  }

  /** Signals the container; false when it is no longer running (or gone). */
  async kill(id: string, signal: string, all = false): Promise<boolean> {
    const r = await this.run(['kill', ...(all ? ['--all'] : []), id, signal]);
    if (r.exitCode === 0) return true;
    if (NOT_FOUND.test(r.stderr) || NOT_RUNNING.test(r.stderr)) return false;
    throw new Error(`runc kill ${id} ${signal}: ${r.stderr.trim() || r.message}`);
  }

  /** Deletes state and cgroups; a missing container is not an error. */
  async delete(id: string): Promise<void> {
    const r = await this.run(['delete', '--force', id]);
    if (r.exitCode === 0 || NOT_FOUND.test(r.stderr)) return;
    throw new Error(`runc delete ${id}: ${r.stderr.trim() || r.message}`);
  }
}
