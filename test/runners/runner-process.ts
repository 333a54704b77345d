import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { request } from 'node:http';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort } from '#tern/runtime';

const RUNNERS = fileURLToPath(new URL('../../runners', import.meta.url));

export const RUNNER_COMMANDS = {
  python: ['python3', join(RUNNERS, 'python/tern_runner.py')],
  node: [process.execPath, join(RUNNERS, 'node/tern-runner.mjs')],
} as const;

export type RunnerLanguage = keyof typeof RUNNER_COMMANDS;

/** One runner started on the host (no container): an app directory of files, a free port. */
export class RunnerProcess {
  readonly dir: string;
  stdout = '';
  stderr = '';
  private child?: ChildProcess;
  private exited?: Promise<[number | null, string | null]>;
  port = 0;

  constructor(
    readonly language: RunnerLanguage,
    files: Record<string, string>,
  ) {
    this.dir = mkdtempSync(join(tmpdir(), `tern-runner-${language}-`));
    for (const [name, text] of Object.entries(files)) writeFileSync(join(this.dir, name), text);
  }

  async start(env: Record<string, string>): Promise<this> {
    this.port = await freePort(new Set());
    const [cmd, ...args] = RUNNER_COMMANDS[this.language];
    const child = spawn(cmd, args, {
      cwd: this.dir,
      env: { PATH: process.env.PATH, PORT: String(this.port), ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stdout!.on('data', (c: Buffer) => (this.stdout += c.toString()));
    child.stderr!.on('data', (c: Buffer) => (this.stderr += c.toString()));
    this.exited = once(child, 'exit') as Promise<[number | null, string | null]>;
    this.child = child;
    return this;
  }

  url(path = '/'): string {
    return `http://127.0.0.1:${this.port}${path}`;
  }

  /** GET /health's status, or 0 while nothing listens yet. */
  async health(): Promise<number> {
    try {
      const res = await fetch(this.url('/health'));
      await res.arrayBuffer();
      return res.status;
    } catch {
      return 0;
    }
  }

  async waitForHealth(status: number, timeoutMs = 15_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while ((await this.health()) !== status) {
      if (Date.now() > deadline) throw new Error(`no ${status} from /health within ${timeoutMs} ms\n${this.stdout}\n${this.stderr}`);
      if (this.child?.exitCode !== null) throw new Error(`runner exited (${this.child?.exitCode})\n${this.stdout}\n${this.stderr}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  post(body: string, headers: Record<string, string> = {}): Promise<Response> {
    return fetch(this.url('/'), { method: 'POST', body, headers: { 'content-type': 'application/json', ...headers } });
  }

  /**
   * POSTs on a connection of its own and closes it once `pieces` pieces of the answer arrived, as
   * a client that hangs up mid-stream; resolves with when it hung up. (A fetch aborted mid-body
   * leaves its pool holding a second, idle connection, which takes a runner's only slot.)
   */
  hangUpAfter(body: string, pieces: number): Promise<number> {
    return new Promise((resolve, reject) => {
      const req = request(this.url('/'), { method: 'POST', agent: false, headers: { 'content-type': 'application/json' } }, (res) => {
        let seen = 0;
        res.on('data', () => {
          if (++seen < pieces) return;
          req.destroy();
          resolve(Date.now());
        });
      });
      req.on('error', (e) => reject(e));
      req.end(body);
    });
  }

  /** POST on a connection of its own (fetch would reuse a kept-alive one, pinned to one worker). */
  postFresh(body: string): Promise<{ status: number; json: Record<string, unknown> }> {
    return new Promise((resolve, reject) => {
      const req = request(this.url('/'), { method: 'POST', agent: false, headers: { 'content-type': 'application/json' } }, (res) => {
        let text = '';
        res.on('data', (c: Buffer) => (text += c.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, json: JSON.parse(text) }));
      });
      req.on('error', reject);
      req.end(body);
    });
  }

  /** Waits until the output holds `pattern` (the pipe may lag the HTTP answer). */
  async waitForOutput(stream: 'stdout' | 'stderr', pattern: string | RegExp, timeoutMs = 3000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!(typeof pattern === 'string' ? this[stream].includes(pattern) : pattern.test(this[stream]))) {
      if (Date.now() > deadline) throw new Error(`${stream} never said ${String(pattern)}:\n${this[stream]}`);
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  signal(sig: NodeJS.Signals) {
    this.child?.kill(sig);
  }

  exit(): Promise<[number | null, string | null]> {
    return this.exited!;
  }

  async stop(): Promise<void> {
    if (this.child && this.child.exitCode === null && this.child.signalCode === null) {
      // SIGTERM first: a Python parent killed outright would leave its forked workers behind.
      this.child.kill('SIGTERM');
      const timer = setTimeout(() => this.child?.kill('SIGKILL'), 5000);
      await this.exited;
      clearTimeout(timer);
    }
    rmSync(this.dir, { recursive: true, force: true });
  }
}
