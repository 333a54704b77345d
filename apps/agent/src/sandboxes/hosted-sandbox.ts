import { readdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { Subscription } from '@nats-io/transport-node';
import type { ExecRequest, ShellResize } from '#tern/contracts';
import { InvokeError } from '#tern/messaging';
import type { RuncRuntime } from '#tern/runtime';
import { SandboxFiles } from './sandbox-files.js';
import { SandboxProcess } from './sandbox-process.js';
import type { SandboxRecord } from './sandbox-labels.js';
import { RESIZE_SCRIPT } from './shell-resize.js';

/** Ended processes a sandbox remembers for `GET …/processes`, oldest forgotten first. */
const ENDED_KEPT = 100;

/** One sandbox this agent runs: its container, processes, files and the subscription that serves its API. */
export class HostedSandbox {
  readonly files: SandboxFiles;
  sub?: Subscription;
  private readonly table = new Map<string, SandboxProcess>();
  private sequence = 0;

  constructor(
    readonly record: SandboxRecord,
    private readonly runtime: RuncRuntime,
    /** Its processes' directories (`<dir>/<pid>`): what their supervisors write, what a new agent adopts. */
    private readonly processDir: string,
    /** Its own address on the agent's bridge (private network only): where its ports are reached. */
    readonly address: string | undefined,
  ) {
    this.files = new SandboxFiles(runtime, record.sandboxId);
  }

  get id(): string {
    return this.record.sandboxId;
  }

  process(pid: string | undefined): SandboxProcess | undefined {
    return pid ? this.table.get(pid) : undefined;
  }

  processes(): SandboxProcess[] {
    return [...this.table.values()];
  }

  /** Starts a process; `callMs` (the call's own timeout) bounds it when the request names no timeout. */
  async exec(args: string[], request: ExecRequest, callMs: number): Promise<SandboxProcess> {
    const pid = `p${++this.sequence}`;
    const p = await SandboxProcess.start(pid, args, this.runtime, this.id, join(this.processDir, pid), {
      spec: {
        args,
        cwd: request.cwd ?? this.record.workdir,
        ...(request.env ? { env: request.env } : {}),
      },
      ...(request.stdin !== undefined ? { stdin: request.stdin } : {}),
      keepStdinOpen: request.keep_stdin_open ?? false,
      timeoutMs: request.timeout ? request.timeout * 1000 : callMs,
    });
    this.track(p);
    return p;
  }

  /** After an agent restart: the processes the former agent started, running or ended since, followed again. */
  async adoptProcesses(): Promise<void> {
    const pids = (await readdir(this.processDir).catch(() => [] as string[])).filter((d) => /^p\d+$/.test(d));
    pids.sort((a, b) => Number(a.slice(1)) - Number(b.slice(1)));
    for (const pid of pids) {
      this.sequence = Math.max(this.sequence, Number(pid.slice(1)));
      const p = await SandboxProcess.adopt(pid, join(this.processDir, pid));
      if (p) this.track(p);
      else await rm(join(this.processDir, pid), { recursive: true, force: true });
    }
  }

  /** The pty of the shell opened by tunnel `tunnelId` takes a new size (404 when no such shell runs here). */
  async resizeShell(tunnelId: string, size: ShellResize): Promise<void> {
    const child = this.runtime.exec(this.id, { args: ['sh', '-c', RESIZE_SCRIPT, 'sh', tunnelId, String(size.cols), String(size.rows)] });
    const err: Buffer[] = [];
    child.stderr!.on('data', (c: Buffer) => err.push(c));
    child.stdout!.resume();
    child.stdin!.on('error', () => undefined);
    child.stdin!.end();
    const result = await child;
    if (result.exitCode === 44) throw new InvokeError(404, `no shell ${tunnelId} runs in sandbox ${this.id}`);
    if (result.exitCode !== 0)
      throw new InvokeError(
        409,
        `the shell's terminal did not take the size: ${Buffer.concat(err).toString('utf8').trim().slice(0, 500) || `status ${result.exitCode}`}`,
      );
  }

  /** Kills what still runs; the container's removal would too, this only makes it prompt. */
  async killAll(): Promise<void> {
    await Promise.all(this.processes().map((p) => p.kill('SIGKILL', 'sandbox removed')));
    this.close();
    await rm(this.processDir, { recursive: true, force: true });
  }

  /** Stops following its processes (the agent stops; they go on for the next one). */
  close(): void {
    for (const p of this.processes()) p.close();
  }

  private track(p: SandboxProcess): void {
    this.table.set(p.pid, p);
    if (p.running) p.once('exit', () => this.forgetOldest());
  }

  private forgetOldest(): void {
    const ended = this.processes().filter((p) => !p.running);
    for (const p of ended.slice(0, Math.max(0, ended.length - ENDED_KEPT))) {
      this.table.delete(p.pid);
      void rm(p.dir, { recursive: true, force: true }).catch(() => undefined);
    }
  }
}
