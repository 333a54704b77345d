import { EventEmitter, on } from 'node:events';
import { type FSWatcher, watch } from 'node:fs';
import { Duplex } from 'node:stream';
import { mkdir, readdir, readFile, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { ExecEvent, SandboxProcessView } from '#tern/contracts';
import { Logger } from '@nestjs/common';
import { EXEC_FILES, exitFromStatus, type ExecSpec, type RuncRuntime } from '#tern/runtime';
import { fireAndForget } from '#tern/timing';
import { ExecOutputReader } from './exec-output.js';

type OutputEvent = { stream: 'stdout' | 'stderr'; data: string };
type ExitEvent = Extract<ExecEvent, { exit_code: number | null }>;
type Supervisor = ReturnType<RuncRuntime['execSupervised']>;

/** What a process keeps of each stream for `GET …/processes/<pid>`: the last MiB. */
const KEPT_BYTES_PER_STREAM = 2 ** 20;
/**
 * How often a process is looked at besides the file-change notices (which can be missed, e.g.
 * on some network filesystems): its output read, and for one adopted after a restart, whether
 * its supervisor still runs.
 */
const CHECK_MS = 500;

/** Files of a process's directory beside the supervisor's (EXEC_FILES). */
const FILES = {
  /** What it runs, when it started, its timeout: written before it starts. */
  record: 'process.json',
  /** runc's --pid-file: the process's host pid. */
  hostPid: 'host.pid',
  /** Why it was killed, written before the signal: its state stays `killed` across a restart. */
  killed: 'killed',
};

interface ProcessRecord {
  cmd: string[];
  startedAt: string;
  timeoutMs: number;
}

const logger = new Logger('sandbox-processes');

export interface ProcessOptions {
  spec: ExecSpec;
  stdin?: string;
  keepStdinOpen?: boolean;
  timeoutMs: number;
}

/**
 * One process started in a sandbox with `runc exec` under a supervisor that outlives the agent
 * (RuncRuntime.execSupervised): its output read back from the supervisor's files, kept (bounded)
 * and fanned out to whoever follows it, killed at its timeout. A new agent adopts it from its
 * directory, output so far included, and learns its exit from the exit file even if it ended
 * while no agent ran. Its stdin is a pipe from the agent that started it: an adopted process's
 * stdin is closed. Ends once.
 */
export class SandboxProcess extends EventEmitter {
  endedAt?: Date;
  private exit?: ExitEvent;
  private killedBy?: string;
  private readonly kept: OutputEvent[] = [];
  private readonly keptBytes = { stdout: 0, stderr: 0 };
  private readonly readers: ExecOutputReader[];
  private readonly watcher?: FSWatcher;
  private readonly checker: NodeJS.Timeout;
  private readonly timer: NodeJS.Timeout;
  private draining?: Promise<void>;
  private drainAgain = false;
  private finishing = false;

  /** Starts `options.spec` in the container under a supervisor writing to `dir`. */
  static async start(
    pid: string,
    cmd: string[],
    runtime: RuncRuntime,
    containerId: string,
    dir: string,
    options: ProcessOptions,
  ): Promise<SandboxProcess> {
    await mkdir(dir, { recursive: true });
    const record: ProcessRecord = { cmd, startedAt: new Date().toISOString(), timeoutMs: options.timeoutMs };
    await writeFile(join(dir, FILES.record), JSON.stringify(record));
    const supervisor = runtime.execSupervised(containerId, { ...options.spec, pidFile: join(dir, FILES.hostPid) }, dir);
    supervisor.stdin!.on('error', () => undefined); // a process that exits before reading its stdin
    if (options.stdin !== undefined) supervisor.stdin!.write(options.stdin);
    if (!options.keepStdinOpen) supervisor.stdin!.end();
    return new SandboxProcess(pid, dir, record, undefined, supervisor);
  }

  /** The process a former agent started in `dir`; undefined when its start never got as far as its record. */
  static async adopt(pid: string, dir: string): Promise<SandboxProcess | undefined> {
    const text = await readFile(join(dir, FILES.record), 'utf8').catch(() => undefined);
    if (text === undefined) return undefined;
    const killedBy = await readFile(join(dir, FILES.killed), 'utf8').catch(() => undefined);
    return new SandboxProcess(pid, dir, JSON.parse(text) as ProcessRecord, killedBy);
  }

  private constructor(
    readonly pid: string,
    readonly dir: string,
    private readonly record: ProcessRecord,
    killedBy: string | undefined,
    private readonly supervisor?: Supervisor,
  ) {
    super();
    this.setMaxListeners(0);
    this.killedBy = killedBy;
    this.readers = [new ExecOutputReader(dir, 'stdout'), new ExecOutputReader(dir, 'stderr')];
    try {
      this.watcher = watch(dir, () => this.drainLater());
      this.watcher.on('error', () => undefined); // its directory removed with the sandbox
    } catch {
      // No notices (no inotify watches left): the checks below still follow it.
    }
    this.checker = setInterval(() => fireAndForget(`checking process ${pid}`, logger, this.check()), CHECK_MS);
    const left = Date.parse(record.startedAt) + record.timeoutMs - Date.now();
    this.timer = setTimeout(
      () => fireAndForget(`killing process ${pid} at its timeout`, logger, this.kill('SIGKILL', 'timeout')),
      Math.max(0, left),
    );
    if (supervisor)
      fireAndForget(
        `following process ${pid}`,
        logger,
        supervisor.then(() => this.finish()),
      );
    else fireAndForget(`checking process ${pid}`, logger, this.check());
  }

  get cmd(): string[] {
    return this.record.cmd;
  }

  get startedAt(): Date {
    return new Date(this.record.startedAt);
  }

  get running(): boolean {
    return !this.exit;
  }

  /** Resolves once the process has ended. */
  ended(): Promise<void> {
    return this.exit ? Promise.resolve() : new Promise((resolve) => this.once('exit', () => resolve()));
  }

  /** The pid line, everything produced so far, then the rest as it comes, then the exit. */
  async *events(signal?: AbortSignal): AsyncGenerator<ExecEvent> {
    yield { pid: this.pid };
    if (this.exit) {
      yield* this.kept;
      yield this.exit;
      return;
    }
    // Listening starts before the copy of what was kept, in the same tick: nothing falls between.
    const live = on(this, 'output', { close: ['exit'], ...(signal ? { signal } : {}) }) as AsyncIterableIterator<[OutputEvent]>;
    yield* [...this.kept];
    for await (const [event] of live) yield event;
    if (this.exit) yield this.exit;
  }

  /**
   * Its stdin and its output as one byte stream (a shell's terminal): what was produced so far,
   * then output as it comes; the stream ends when the process does.
   */
  terminal(): Duplex {
    const duplex = new Duplex({
      write: (chunk: Buffer, _encoding, done) => {
        this.write(chunk);
        done();
      },
      final: (done) => {
        this.closeStdin();
        done();
      },
      read: () => undefined,
    });
    fireAndForget(`carrying the terminal of process ${this.pid}`, logger, async () => {
      for await (const event of this.events()) if ('data' in event) duplex.push(Buffer.from(event.data, 'utf8'));
      duplex.push(null);
    });
    return duplex;
  }

  /** False once it has ended, closed its stdin, or was adopted (its stdin was the former agent's pipe). */
  write(data: string | Uint8Array): boolean {
    const stdin = this.supervisor?.stdin;
    if (!this.running || !stdin?.writable) return false;
    stdin.write(data);
    return true;
  }

  closeStdin(): void {
    this.supervisor?.stdin?.end();
  }

  /** Signals the process inside the sandbox (runc wrote its host pid); false once it has ended. */
  async kill(signal: NodeJS.Signals = 'SIGKILL', why = 'killed'): Promise<boolean> {
    // Without its supervisor the pids it left may be anyone's now.
    if (!this.running || !(await this.supervisorPid())) return false;
    if (this.killedBy === undefined) {
      this.killedBy = why;
      await writeFile(join(this.dir, FILES.killed), why).catch(() => undefined);
    }
    // Before runc has written the process's pid, the supervisor's tree holds it (runc, then the process).
    const hostPid = Number(await readFile(join(this.dir, FILES.hostPid), 'utf8').catch(() => ''));
    const root = Number.isInteger(hostPid) && hostPid > 0 ? hostPid : await this.supervisorPid();
    if (!root) return false;
    // Its descendants too (a shell's children would otherwise keep its output open after it
    // died), found first and signalled after it: a shell that saw its child die first would go on.
    const tree = [root, ...(await descendants(root))];
    let signalled = false;
    for (const pid of tree) {
      try {
        process.kill(pid, signal);
        signalled = true;
      } catch {
        // ended meanwhile
      }
    }
    return signalled;
  }

  /** Stops following it (the agent is stopping); the process itself goes on, for the next agent. */
  close(): void {
    this.watcher?.close();
    clearInterval(this.checker);
    clearTimeout(this.timer);
  }

  view(withOutput: boolean): SandboxProcessView {
    return {
      pid: this.pid,
      cmd: this.cmd,
      state: this.exit ? (this.killedBy ? 'killed' : 'exited') : 'running',
      exit_code: this.exit?.exit_code ?? null,
      signal: this.exit?.signal ?? null,
      started_at: this.startedAt.toISOString(),
      ended_at: this.endedAt?.toISOString() ?? null,
      ...(withOutput ? { output: [...this.kept] } : {}),
    };
  }

  /** Reads what the files gained, once at a time; a call during a read makes it read again after. */
  private drain(): Promise<void> {
    if (this.draining) {
      this.drainAgain = true;
      return this.draining;
    }
    this.draining = (async () => {
      do {
        this.drainAgain = false;
        for (const reader of this.readers)
          for (let text = await reader.read(); text !== undefined; text = await reader.read()) this.output(reader.stream, text);
      } while (this.drainAgain);
    })().finally(() => (this.draining = undefined));
    return this.draining;
  }

  private drainLater(): void {
    fireAndForget(`reading the output of process ${this.pid}`, logger, this.drain());
  }

  /** Reads new output; ends an adopted process once its exit status is written or its supervisor is gone. */
  private async check(): Promise<void> {
    await this.drain();
    if (this.supervisor || this.exit) return;
    if ((await this.exitStatus()) !== undefined || !(await this.supervisorPid())) await this.finish();
  }

  /** The status in the exit file once its line is whole (null: not a number); undefined before. */
  private async exitStatus(): Promise<number | null | undefined> {
    const text = await readFile(join(this.dir, EXEC_FILES.exit), 'utf8').catch(() => '');
    if (!text.endsWith('\n')) return undefined;
    const status = Number(text.trim());
    return Number.isInteger(status) ? status : null;
  }

  /** Once its supervisor has written the exit status (or is gone without it): the rest of the output, then the exit. */
  private async finish(): Promise<void> {
    if (this.finishing) return;
    this.finishing = true;
    this.close();
    await this.drain();
    for (const reader of this.readers) this.output(reader.stream, await reader.end());
    const status = await this.exitStatus();
    const { exitCode, signal } = exitFromStatus(status ?? null);
    this.endedAt = (status !== undefined && (await stat(join(this.dir, EXEC_FILES.exit)).catch(() => undefined))?.mtime) || new Date();
    this.exit = {
      exit_code: exitCode,
      signal: signal ?? null,
      ...(this.killedBy === 'timeout'
        ? { error: `killed after its timeout of ${Math.round(this.record.timeoutMs / 1000)} s` }
        : status === undefined
          ? { error: 'its supervisor ended without recording an exit status (was the machine restarted?)' }
          : {}),
    };
    this.emit('exit', this.exit);
  }

  /** The supervisor's pid while it runs (its command line names this directory: not a reused pid); undefined once gone. */
  private async supervisorPid(): Promise<number | undefined> {
    const pid = this.supervisor?.pid ?? Number(await readFile(join(this.dir, EXEC_FILES.supervisorPid), 'utf8').catch(() => ''));
    if (!Number.isInteger(pid) || pid <= 0) return undefined;
    const cmdline = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '');
    return cmdline.split('\0').includes(this.dir) ? pid : undefined;
  }

  private output(stream: 'stdout' | 'stderr', data: string): void {
    if (!data) return;
    const event: OutputEvent = { stream, data };
    this.kept.push(event);
    this.keptBytes[stream] += data.length;
    while (this.keptBytes[stream] > KEPT_BYTES_PER_STREAM) {
      const at = this.kept.findIndex((e) => e.stream === stream);
      this.keptBytes[stream] -= this.kept[at].data.length;
      this.kept.splice(at, 1);
    }
    this.emit('output', event);
  }
}

/** Every process below `pid` on this machine, from /proc (`task/<tid>/children`), parents first. */
async function descendants(pid: number): Promise<number[]> {
  const found: number[] = [];
  const tasks = await readdir(`/proc/${pid}/task`).catch(() => [] as string[]);
  for (const tid of tasks) {
    const children = await readFile(`/proc/${pid}/task/${tid}/children`, 'utf8').catch(() => '');
    for (const child of children.split(/\s+/).filter(Boolean).map(Number)) found.push(child, ...(await descendants(child)));
  }
  return found;
}
