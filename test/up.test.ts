import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { stackSandbox } from './support/stack.js';

/**
 * `npm run up` end to end against the test NATS and Postgres (so it starts no private
 * servers): ready with five services and an agent, a kill -9 that the supervisor repairs,
 * Ctrl-C that leaves nothing behind.
 */
const ROOT = fileURLToPath(new URL('..', import.meta.url));
const CONTROL_PLANE = ['gateway', 'scheduler', 'autoscaler', 'metering', 'reputation'];

interface Ready {
  status: string;
  services: Record<string, { status: string; instances: unknown[] }>;
  agents: { machineId?: string; pool?: string }[];
}
interface RunFile {
  supervisor: { pid: number };
  ready: boolean;
  gatewayUrl: string;
  services: Record<string, { pid: number; port: number; restarts: number }>;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return !/^\S+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
};

async function until<T>(what: string, timeoutMs: number, fn: () => Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  while (Date.now() < deadline) {
    try {
      const v = await fn();
      if (v !== undefined) return v;
    } catch (e) {
      last = e;
    }
    await sleep(200);
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${last ? `: ${String(last)}` : ''}`);
}

async function ready(gateway: string): Promise<{ code: number; body: Ready }> {
  const res = await fetch(`${gateway}/health/ready`, { signal: AbortSignal.timeout(3000) });
  return { code: res.status, body: (await res.json()) as Ready };
}

function runScript(script: string, env: NodeJS.ProcessEnv): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    const p = spawn(process.execPath, [join(ROOT, 'scripts', script)], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    p.stdout.on('data', (d) => (output += d));
    p.stderr.on('data', (d) => (output += d));
    p.on('close', (code) => resolve({ code, output }));
  });
}

describe('npm run up', () => {
  const { env, ternHome, home, cleanup } = stackSandbox('up');
  let up: ChildProcess | undefined;
  let output = '';
  let exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  const runFile = () => JSON.parse(readFileSync(join(ternHome, 'run.json'), 'utf8')) as RunFile;

  afterAll(async () => {
    if (up && up.exitCode === null) {
      up.kill('SIGKILL');
      await runScript('down.mjs', env); // whatever the killed supervisor left
    }
    await cleanup();
  }, 60_000);

  it('starts everything, survives a kill -9 of the scheduler, and stops cleanly on Ctrl-C', async () => {
    up = spawn(process.execPath, [join(ROOT, 'scripts', 'up.mjs')], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
    up.stdout!.on('data', (d) => (output += d));
    up.stderr!.on('data', (d) => (output += d));
    exited = new Promise((resolve) => up!.once('exit', (code, signal) => resolve({ code, signal })));
    const failed = exited.then(({ code }) => {
      throw new Error(`up exited early with ${code}:\n${output}`);
    });
    failed.catch(() => {});

    // Ready: the printed gateway URL comes only after /health/ready said ok with an agent.
    const gateway = await Promise.race([
      failed,
      until('the gateway URL', 150_000, async () => /Gateway:\s+(http:\/\/\S+)/.exec(output)?.[1]),
    ]);
    expect(output).toContain('Tern is up');
    expect(output).toMatch(/Network:\s+127\.0\.0\.1 only, plaintext: no other machine can reach the gateway or NATS/);
    const token = /Operator token:\s+(tern_[A-Za-z0-9_-]{43})\s/.exec(output)?.[1];
    expect(token).toBeDefined();

    const first = await ready(gateway);
    expect(first.code).toBe(200);
    expect(first.body.status).toBe('ok');
    for (const svc of CONTROL_PLANE) expect([svc, first.body.services[svc].status]).toEqual([svc, 'up']);
    expect(first.body.agents).toHaveLength(1);
    expect(first.body.agents[0].pool).toBe('default');

    // State and CLI config on disk.
    const credentials = join(ternHome, 'credentials.json');
    expect(JSON.parse(readFileSync(credentials, 'utf8')).adminToken).toBe(token);
    expect(statSync(credentials).mode & 0o777).toBe(0o600);
    const cliConfig = join(home, '.tern', 'config.json');
    // The private registry takes the gateway's tokens: the CLI logs in with its own token, so
    // `tern deploy` can push the images it builds; no registry password is written anywhere.
    expect(JSON.parse(readFileSync(cliConfig, 'utf8'))).toEqual({
      current: 'local',
      contexts: {
        local: {
          gateway,
          token,
          registry: {
            url: expect.stringMatching(/^http:\/\/127\.0\.0\.1:\d+$/),
            tokenAuth: true,
            insecure: true,
          },
        },
      },
    });
    expect(statSync(cliConfig).mode & 0o777).toBe(0o600);
    const run = runFile();
    expect(run.supervisor.pid).toBe(up.pid);
    expect(run.gatewayUrl).toBe(gateway);
    expect(Object.keys(run.services).sort()).toEqual([...CONTROL_PLANE, 'agent'].sort());

    // A second `up` on the same state dir says so and leaves the first alone.
    const second = await runScript('up.mjs', env);
    expect(second.code).toBe(0);
    expect(second.output).toContain('already running');
    expect(second.output).toContain('npm run down');

    // kill -9 the scheduler: reported down, then restarted by the supervisor and up again.
    const victim = run.services.scheduler.pid;
    process.kill(victim, 'SIGKILL');
    const degraded = await until('scheduler down', 10_000, async () => {
      const r = await ready(gateway);
      return r.body.services.scheduler.status === 'down' ? r : undefined;
    });
    expect(degraded.code).toBe(503);
    expect(degraded.body.status).toBe('degraded');
    await until('scheduler back up', 60_000, async () => {
      const r = await ready(gateway);
      return r.code === 200 && r.body.services.scheduler.status === 'up' ? r : undefined;
    });
    const restarted = runFile().services.scheduler;
    expect(restarted.pid).not.toBe(victim);
    expect(restarted.restarts).toBe(1);
    expect(output).toMatch(/scheduler \(pid \d+\) exited unexpectedly \(signal SIGKILL\)/);

    // Ctrl-C: every child stops, the supervisor exits 0 and forgets what ran.
    const pids = Object.values(runFile().services).map((s) => s.pid);
    up.kill('SIGINT');
    const { code } = await exited;
    expect(code).toBe(0);
    expect(pids.filter(alive)).toEqual([]);
    expect(output).toContain('Stopped');
    expect(() => runFile()).toThrow();

    // down afterwards has nothing to do and says so.
    const down = await runScript('down.mjs', env);
    expect(down.code).toBe(0);
    expect(down.output).toContain('Nothing was running');
  }, 240_000);
});
