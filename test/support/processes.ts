import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { freePort } from '#tern/runtime';
import { serviceCredsFile } from './nats-users.js';

export { freePort };

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

const CONTROL_PLANE = ['gateway', 'scheduler', 'autoscaler', 'metering', 'reputation'];

/**
 * A control-plane service's own NATS user in its namespace, issued the way `npm run up` issues
 * it (scripts/nats-auth.mjs creds), and for the gateway the account signer it issues machine
 * users with. Agents get theirs from the gateway when they register.
 */
function natsUserEnv(name: string, env: Record<string, string>): Record<string, string> {
  const dir = process.env.TERN_NATS_AUTH_DIR;
  if (!dir || env.NATS_CREDS || !CONTROL_PLANE.includes(name)) return {};
  return {
    NATS_CREDS: serviceCredsFile(name, env.NATS_NAMESPACE ?? 'tern'),
    ...(name === 'gateway' ? { NATS_ACCOUNT_SIGNER: join(dir, 'signer.json') } : {}),
  };
}

/** A service started from the build (dist/), as `npm run up` starts it; its JSON log lines are kept. */
export class ServiceProcess {
  readonly lines: string[] = [];
  private child?: ChildProcess;
  private exited?: Promise<number | null>;

  constructor(
    readonly name: string,
    readonly env: Record<string, string>,
  ) {}

  get pid(): number | undefined {
    return this.child?.pid;
  }

  get running(): boolean {
    return !!this.child && this.child.exitCode === null && this.child.signalCode === null;
  }

  start(): this {
    const child = spawn(process.execPath, [`dist/apps/${this.name}/src/main.js`], {
      cwd: ROOT,
      env: { PATH: process.env.PATH, HOME: process.env.HOME, ...natsUserEnv(this.name, this.env), ...this.env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let buffer = '';
    const onData = (chunk: Buffer) => {
      buffer += chunk.toString();
      const parts = buffer.split('\n');
      buffer = parts.pop() ?? '';
      this.lines.push(...parts.filter(Boolean));
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    this.exited = once(child, 'exit').then(([code]) => code as number | null);
    this.child = child;
    return this;
  }

  /** JSON log records (non-JSON lines are skipped). */
  records(): Record<string, unknown>[] {
    return this.lines.flatMap((l) => {
      try {
        return [JSON.parse(l) as Record<string, unknown>];
      } catch {
        return [];
      }
    });
  }

  async waitForLog(match: RegExp | ((r: Record<string, unknown>) => boolean), timeoutMs = 30_000): Promise<Record<string, unknown>> {
    const deadline = Date.now() + timeoutMs;
    const test = typeof match === 'function' ? match : (r: Record<string, unknown>) => match.test(String(r.msg ?? ''));
    for (;;) {
      const hit = this.records().find(test);
      if (hit) return hit;
      if (!this.running) throw new Error(`${this.name} exited before logging ${match}:\n${this.lines.slice(-20).join('\n')}`);
      if (Date.now() > deadline)
        throw new Error(`${this.name} did not log ${match} in ${timeoutMs} ms:\n${this.lines.slice(-20).join('\n')}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  /** Waits until the service reports it is up (after migrations, streams, consumers and presence). */
  ready(timeoutMs = 60_000) {
    return this.waitForLog(/listening on|started \(no HTTP/, timeoutMs);
  }

  async kill(signal: NodeJS.Signals = 'SIGKILL'): Promise<number | null> {
    if (!this.running) return this.exited ?? null;
    this.child!.kill(signal);
    return this.exited!;
  }

  async stop(timeoutMs = 10_000): Promise<number | null> {
    if (!this.running) return this.exited ?? null;
    this.child!.kill('SIGTERM');
    const timer = setTimeout(() => this.child?.kill('SIGKILL'), timeoutMs);
    const code = await this.exited!;
    clearTimeout(timer);
    return code;
  }
}

export async function waitFor<T>(what: string, probe: () => Promise<T | undefined | false>, timeoutMs = 15_000, everyMs = 200): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await probe();
      if (v) return v;
    } catch (e) {
      last = e;
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}${last ? `: ${(last as Error).message}` : ''}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}
