import { execFile, execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { parse } from 'yaml';
import { createTestSchema, type TestSchema, testEnv, uniqueName } from '../support/isolation.js';
import { deleteNamespaces } from '../support/nats.js';
import { freePort, ServiceProcess } from '../support/processes.js';
import { agentNetworkEnv, removeAgentNetwork } from '../support/agent-network.js';

export const ADMIN = `tern_${'a'.repeat(43)}`;

/** tar.gz of a folder, as `tern deploy` uploads it; returns the bytes and "sha256:<hex>". */
export function bundle(files: Record<string, string>): { data: Buffer; digest: string } {
  const dir = mkdtempSync(join(tmpdir(), 'tern-bundle-'));
  for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
  const archive = join(dir, '..', `${dir.split('/').at(-1)}.tar.gz`);
  execFileSync('tar', ['-czf', archive, '-C', dir, '.']);
  const data = readFileSync(archive);
  rmSync(dir, { recursive: true, force: true });
  rmSync(archive, { force: true });
  return { data, digest: `sha256:${createHash('sha256').update(data).digest('hex')}` };
}

/** Uploads a bundle to the gateway as the admin (PUT /api/v1/code/<digest>); answers the status. */
export async function uploadBundle(base: string, b: { data: Buffer; digest: string }): Promise<number> {
  const put = await fetch(`${base}/api/v1/code/${b.digest}`, {
    method: 'PUT',
    headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/gzip' },
    body: b.data,
  });
  return put.status;
}

/** A gateway and a scheduler from dist/, in their own schema and namespace, as an agent meets them. */
export class ControlPlane {
  readonly processes: ServiceProcess[] = [];
  base = '';

  private constructor(
    readonly schema: TestSchema,
    readonly namespace: string,
  ) {}

  static async start(label: string, env: Record<string, string> = {}): Promise<ControlPlane> {
    const plane = new ControlPlane(await createTestSchema(label), uniqueName(label));
    const gatewayPort = await freePort();
    plane.base = `http://127.0.0.1:${gatewayPort}`;
    const shared = testEnv(plane.schema, plane.namespace, env);
    plane.processes.push(
      new ServiceProcess('gateway', { ...shared, HTTP_PORT: String(gatewayPort), BOOTSTRAP_ADMIN_TOKEN: ADMIN }).start(),
      new ServiceProcess('scheduler', { ...shared, HTTP_PORT: String(await freePort()) }).start(),
    );
    await Promise.all(plane.processes.map((p) => p.ready(90_000)));
    return plane;
  }

  async call<T = any>(
    method: string,
    path: string,
    token: string | undefined = ADMIN,
    body?: unknown,
  ): Promise<{ status: number; body: T }> {
    const res = await fetch(`${this.base}${path}`, {
      method,
      headers: {
        ...(token ? { authorization: `Bearer ${token}` } : {}),
        ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
      },
      body: body !== undefined ? JSON.stringify(body) : undefined,
    });
    const text = await res.text();
    let parsed: unknown = text;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      /* not JSON */
    }
    return { status: res.status, body: parsed as T };
  }

  async stop() {
    await Promise.all(this.processes.map((p) => p.stop()));
    await this.schema.drop();
    await deleteNamespaces(this.namespace);
  }
}

/** An agent process from dist/, configured through the environment with its own state directory. */
export class AgentProcess extends ServiceProcess {
  constructor(
    readonly stateDir: string,
    env: Record<string, string>,
  ) {
    super('agent', {
      LOG_FORMAT: 'json',
      LOG_LEVEL: 'info',
      AGENT_STATE_DIR: stateDir,
      AGENT_DASHBOARD: 'off',
      ...agentNetworkEnv(stateDir),
      ...env,
    });
  }

  static forPlane(plane: ControlPlane, env: Record<string, string> = {}, stateDir = tempStateDir()): AgentProcess {
    return new AgentProcess(stateDir, { AGENT_GATEWAY_URL: plane.base, AGENT_TOKEN: ADMIN, ...env });
  }

  /** The agent is in: registered, network tested, heartbeating, serving commands. */
  joined(timeoutMs = 60_000) {
    return this.ready(timeoutMs);
  }

  configFile(): Record<string, string> {
    return parse(readFileSync(join(this.stateDir, 'config.yaml'), 'utf8')) as Record<string, string>;
  }

  /** Exit code once it has exited by itself. */
  async exitCode(timeoutMs = 30_000): Promise<number | null> {
    const deadline = Date.now() + timeoutMs;
    while (this.running && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    return this.kill();
  }
}

export function tempStateDir(): string {
  return mkdtempSync(join(tmpdir(), 'tern-agent-test-'));
}

export function removeStateDir(dir: string) {
  removeAgentNetwork(dir);
  rmSync(dir, { recursive: true, force: true });
}

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** `tern-agent` as a user runs it (bin/tern-agent.js over the build). */
export async function ternAgent(
  args: string[],
  env: Record<string, string> = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await promisify(execFile)(process.execPath, ['bin/tern-agent.js', ...args], {
      cwd: ROOT,
      env: { PATH: process.env.PATH, HOME: '/nonexistent', ...env },
    });
    return { code: 0, stdout, stderr };
  } catch (e) {
    const err = e as { code?: number; stdout?: string; stderr?: string };
    return { code: err.code ?? 1, stdout: err.stdout ?? '', stderr: err.stderr ?? '' };
  }
}
