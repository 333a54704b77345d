import { EventEmitter, on } from 'node:events';
import { Duplex } from 'node:stream';
import { readdir, readFile } from 'node:fs/promises';
import { StringDecoder } from 'node:string_decoder';
import type { ExecEvent, SandboxProcessView } from '#tern/contracts';
import { Logger } from '@nestjs/common';
import { exitFromStatus, type ExecSpec, type RuncRuntime } from '#tern/runtime';
import { fireAndForget } from '#tern/timing';

type OutputEvent = { stream: 'stdout' | 'stderr'; data: string };
type ExitEvent = Extract<ExecEvent, { exit_code: number | null }>;

/** What a process keeps of each stream for `GET …/processes/<pid>`: the last MiB. */
const KEPT_BYTES_PER_STREAM = 2 ** 20;

const logger = new Logger('sandbox-processes');

export interface ProcessOptions {
  spec: ExecSpec;
  stdin?: string;
  keepStdinOpen?: boolean;
  timeoutMs: number;
}

/**
 * One process started in a sandbox with `runc exec`: its output kept (bounded) and fanned out to
 * whoever follows it, its stdin open for writes, killed at its timeout. Ends once.
 */
export class SandboxProcess extends EventEmitter {
  readonly startedAt = new Date();
  endedAt?: Date;
  private exit?: ExitEvent;
  private killedBy?: string;
  private readonly kept: OutputEvent[] = [];
  private readonly keptBytes = { stdout: 0, stderr: 0 };
  private readonly child: ReturnType<RuncRuntime['exec']>;
  private readonly timer: NodeJS.Timeout;

  constructor(
    readonly pid: string,
    readonly cmd: string[],
    runtime: RuncRuntime,
    containerId: string,
    private readonly options: ProcessOptions,
  ) {
    super();
    this.setMaxListeners(0);
    this.child = runtime.exec(containerId, options.spec);
    for (const stream of ['stdout', 'stderr'] as const) {
      const decoder = new StringDecoder('utf8');
      this.child[stream]!.on('data', (chunk: Buffer) => this.output(stream, decoder.write(chunk)));
      this.child[stream]!.on('end', () => this.output(stream, decoder.end()));
    }
    this.child.stdin!.on('error', () => undefined); // a process that exits before reading its stdin
    if (options.stdin !== undefined) this.child.stdin!.write(options.stdin);
    if (!options.keepStdinOpen) this.child.stdin!.end();
    this.timer = setTimeout(
      () => fireAndForget(`killing process ${pid} at its timeout`, logger, this.kill('SIGKILL', 'timeout')),
      options.timeoutMs,
    );
    fireAndForget(
      `following process ${pid}`,
      logger,
      this.child.then((result) => {
        clearTimeout(this.timer);
        const status = typeof result.exitCode === 'number' ? result.exitCode : null;
        const { exitCode, signal } = exitFromStatus(status);
        this.endedAt = new Date();
        this.exit = {
          exit_code: exitCode,
          signal: signal ?? null,
          ...(this.killedBy === 'timeout' ? { error: `killed after its timeout of ${Math.round(options.timeoutMs / 1000)} s` } : {}),
        };
        this.emit('exit', this.exit);
      }),
    );
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

  write(data: string | Uint8Array): boolean {
    if (!this.running || !this.child.stdin!.writable) return false;
    this.child.stdin!.write(data);
    return true;
  }

  closeStdin(): void {
    this.child.stdin!.end();
  }

  /** Signals the process inside the sandbox (runc wrote its host pid); false once it has ended. */
  async kill(signal: NodeJS.Signals = 'SIGKILL', why = 'killed'): Promise<boolean> {
    if (!this.running) return false;
    this.killedBy ??= why;
    const hostPid = this.options.spec.pidFile ? Number(await readFile(this.options.spec.pidFile, 'utf8').catch(() => '')) : NaN;
    if (!Number.isInteger(hostPid) || hostPid <= 0) return this.child.kill(signal);
    // Its descendants too (a shell's children would otherwise keep its output open after it
    // died), found first and signalled after it: a shell that saw its child die first would go on.
    const tree = [hostPid, ...(await descendants(hostPid))];
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
