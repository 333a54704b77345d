import { mkdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { Subscription } from '@nats-io/transport-node';
import type { ExecRequest, ShellResize } from '#tern/contracts';
import { InvokeError } from '#tern/messaging';
import type { RuncRuntime } from '#tern/runtime';
import { SandboxFiles } from './sandbox-files.js';
import { SandboxProcess } from './sandbox-process.js';
import type { SandboxRecord } from './sandbox-labels.js';
import { RESIZE_SCRIPT } from './sandbox-tunnels.js';

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
    /** Where runc writes the host pids of its processes. */
    private readonly pidDir: string,
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
    await mkdir(this.pidDir, { recursive: true });
    const pid = `p${++this.sequence}`;
    const p = new SandboxProcess(pid, args, this.runtime, this.id, {
      spec: {
        args,
        cwd: request.cwd ?? this.record.workdir,
        ...(request.env ? { env: request.env } : {}),
        pidFile: join(this.pidDir, `${pid}.pid`),
      },
      ...(request.stdin !== undefined ? { stdin: request.stdin } : {}),
      keepStdinOpen: request.keep_stdin_open ?? false,
      timeoutMs: request.timeout ? request.timeout * 1000 : callMs,
    });
    this.table.set(pid, p);
    p.once('exit', () => this.forgetOldest());
    return p;
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
    await rm(this.pidDir, { recursive: true, force: true });
  }

  private forgetOldest(): void {
    const ended = this.processes().filter((p) => !p.running);
    for (const p of ended.slice(0, Math.max(0, ended.length - ENDED_KEPT))) this.table.delete(p.pid);
  }
}
