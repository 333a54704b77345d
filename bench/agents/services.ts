/** bench/agents' control-plane services: the built ones, as child processes, as `npm run up` starts them. */
import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import { ROOT, sleep } from '../invoke/stack.js';

/** A control-plane service from the build, as `npm run up` starts it; its output kept for when it fails to start. */
export class ServiceProcess {
  private child?: ChildProcess;
  private output = '';

  constructor(
    readonly name: string,
    private readonly env: Record<string, string>,
    /** Node's own flags (a V8 CPU profile: `--cpu-prof`, which NODE_OPTIONS refuses). */
    private readonly nodeArgs: string[] = [],
  ) {}

  get pid(): number | undefined {
    return this.child?.pid;
  }

  start(): this {
    this.child = spawn(process.execPath, [...this.nodeArgs, join(ROOT, `dist/apps/${this.name}/src/main.js`)], {
      cwd: ROOT,
      env: { PATH: process.env.PATH, HOME: process.env.HOME, ...this.env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const keep = (d: Buffer) => (this.output = (this.output + d.toString()).slice(-20_000));
    this.child.stdout!.on('data', keep);
    this.child.stderr!.on('data', keep);
    return this;
  }

  async ready(timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!/listening on|started \(no HTTP/.test(this.output)) {
      if (exited(this.child!) || Date.now() > deadline) throw new Error(`${this.name} did not start:\n${this.output.slice(-3000)}`);
      await sleep(100);
    }
  }

  /** The last warnings and errors it logged (what to look at when a step lags). */
  warnings(count: number): string[] {
    return this.output
      .split('\n')
      .filter((l) => /"level":(40|50|60)/.test(l))
      .slice(-count);
  }

  async stop(): Promise<void> {
    const child = this.child;
    // Killed by a signal (a `timeout`'s SIGTERM reaches the whole process group) it has no exit
    // code, only a signal: waiting for an exit already past would never end.
    if (!child || exited(child)) return;
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
    await new Promise((r) => child.once('exit', r));
    clearTimeout(timer);
  }
}

function exited(child: ChildProcess): boolean {
  return child.exitCode !== null || child.signalCode !== null;
}
