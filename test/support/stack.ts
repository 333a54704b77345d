import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { TEST_DATABASE_URL, TEST_NATS_URL, uniqueName } from './isolation.js';
import { deleteNamespaces } from './nats.js';
import { agentNetworkEnv, removeAgentNetwork } from './agent-network.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

export interface Stack {
  readonly gateway: string;
  readonly token: string;
  readonly env: NodeJS.ProcessEnv;
  /** Runs the `tern` CLI against this stack; resolves its exit code and output. */
  tern(...args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }>;
  /** A fresh temporary directory (a deployment's folder, say) that stop() removes. */
  scratch(label: string): string;
  /** The services `up` started and their pids, as its run.json lists them (to kill -9 one). */
  services(): Record<string, { pid: number }>;
  /** A deployment's running containers, as the API counts them. */
  actual(name: string): Promise<number>;
  stop(): Promise<void>;
}

function run(args: string[], env: NodeJS.ProcessEnv) {
  return new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
    const p = spawn(process.execPath, args, { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    p.stdout.on('data', (d) => (stdout += d));
    p.stderr.on('data', (d) => (stderr += d));
    p.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/**
 * Containers outlive their agent by design; a test that killed an agent may leave one that
 * the restarted agent had not stopped by the time `down` ran. Nothing may outlive the test.
 */
function removeContainers(ternHome: string) {
  const agents = join(ternHome, 'agent');
  if (!existsSync(agents)) return;
  for (const dir of readdirSync(agents)) {
    const root = join(agents, dir, 'runtime', 'runc');
    if (!existsSync(root)) continue;
    const listed = JSON.parse(execFileSync('runc', ['--root', root, 'list', '--format', 'json'], { encoding: 'utf8' }) || '[]') as
      { id: string }[] | null;
    for (const c of listed ?? []) execFileSync('runc', ['--root', root, 'delete', '--force', c.id]);
  }
}

/**
 * Where a stack started by the tests lives: its own state dir and HOME (CLI config), on the
 * test NATS and Postgres under a fresh namespace and schema, so `up` starts no private servers.
 */
export interface StackSandbox {
  readonly env: NodeJS.ProcessEnv;
  readonly ternHome: string;
  readonly home: string;
  /** Drops the schema, the namespace's streams and buckets, the containers and the dirs. */
  cleanup(): Promise<void>;
}

export function stackSandbox(label: string): StackSandbox {
  const namespace = uniqueName(label);
  const schema = uniqueName(label);
  const ternHome = mkdtempSync(join(tmpdir(), `tern-${label}-`));
  const home = mkdtempSync(join(tmpdir(), 'tern-home-'));
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    TERN_HOME: ternHome,
    HOME: home,
    NATS_URL: TEST_NATS_URL,
    NATS_NAMESPACE: namespace,
    DATABASE_URL: TEST_DATABASE_URL,
    DATABASE_SCHEMA: schema,
    TERN_GATEWAY_PORT: '0',
    TERN_SKIP_INSTALL: '1', // no apt-get, no npm ci inside a test
    TERN_SKIP_BUILD: '1', // npm test built dist/ already
    LOG_LEVEL: 'info',
    NO_COLOR: '1',
    ...agentNetworkEnv(ternHome),
  };
  return {
    env,
    ternHome,
    home,
    async cleanup() {
      // Every step runs even when one fails (a loaded machine's NATS may time out), so a failed
      // step leaves no containers, network or directories behind; the first failure is thrown after.
      await everyStep([
        () => removeContainers(ternHome),
        async () => {
          const db = new pg.Client({ connectionString: TEST_DATABASE_URL });
          await db.connect();
          try {
            await db.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
          } finally {
            await db.end();
          }
        },
        () => deleteNamespaces(namespace),
        () => removeAgentNetwork(ternHome),
        () => rmSync(ternHome, { recursive: true, force: true }),
        () => rmSync(home, { recursive: true, force: true }),
      ]);
    },
  };
}

/** Runs every step in order, each even when an earlier one failed; then throws the first failure. */
export async function everyStep(steps: (() => unknown)[]): Promise<void> {
  let first: unknown;
  for (const step of steps) {
    try {
      await step();
    } catch (e) {
      first ??= e;
    }
  }
  if (first !== undefined) throw first;
}

/**
 * The whole system as a newcomer gets it from `npm run up -- --detach`, with `args` added and
 * `env` laid over the sandbox's (a variable set to undefined is removed: no NATS_URL starts a
 * private NATS).
 */
export async function startStack(
  label: string,
  options: { args?: string[]; env?: Record<string, string | undefined> } = {},
): Promise<Stack & { output: string }> {
  const sandbox = stackSandbox(label);
  const env = { ...sandbox.env, ...options.env };
  for (const [k, v] of Object.entries(env)) if (v === undefined) delete env[k];
  const up = await run([join(ROOT, 'scripts', 'up.mjs'), '--detach', ...(options.args ?? [])], env);
  if (up.code !== 0) {
    await sandbox.cleanup();
    throw new Error(`npm run up failed (${up.code}):\n${up.stdout}\n${up.stderr}`);
  }
  const config = JSON.parse(readFileSync(join(sandbox.home, '.tern', 'config.json'), 'utf8'));
  const scratches: string[] = [];
  const { gateway, token } = config.contexts.local as { gateway: string; token: string };
  return {
    gateway,
    token,
    env,
    output: up.stdout + up.stderr,
    tern: (...args) => run([join(ROOT, 'bin', 'tern.js'), ...args], env),
    scratch(label) {
      const dir = mkdtempSync(join(tmpdir(), `tern-${label}-`));
      scratches.push(dir);
      return dir;
    },
    services: () =>
      (JSON.parse(readFileSync(join(sandbox.ternHome, 'run.json'), 'utf8')) as { services: Record<string, { pid: number }> }).services,
    async actual(name) {
      const res = await fetch(`${gateway}/api/v1/deployments/${name}`, { headers: { authorization: `Bearer ${token}` } });
      // A refusal (a busy gateway's 503) is no count: a thrown error that waitFor retries, not an
      // undefined that turned a peak into NaN on a loaded machine.
      if (!res.ok) throw new Error(`GET /api/v1/deployments/${name} answered ${res.status}: ${await res.text()}`);
      return ((await res.json()) as { actual: number }).actual;
    },
    async stop() {
      await everyStep([
        () => run([join(ROOT, 'scripts', 'down.mjs')], env),
        () => sandbox.cleanup(),
        ...scratches.map((dir) => () => rmSync(dir, { recursive: true, force: true })),
      ]);
    },
  };
}
