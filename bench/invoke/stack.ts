/**
 * Shared by the end-to-end benches (bench/invoke/e2e.ts, bench/cold-start/main.ts): a Tern stack
 * of their own (scripts/up.mjs --detach with a temp TERN_HOME against the shared NATS and
 * Postgres, own namespace and schema) or an existing one (--gateway/--token), deploying a tiny
 * endpoint with the CLI, finding a container's $PORT and config.json in the agent's runtime
 * state, a keep-alive HTTP load generator, and the teardown.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readdirSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { Agent, request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';
import { BridgeNetwork } from '#tern/runtime';
import { stopOnInterrupt } from '../interrupt.js';

export const ROOT = fileURLToPath(new URL('../../../', import.meta.url)); // dist/bench/invoke → repo root
export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export interface Stack {
  gateway: string;
  token: string;
  /** TERN_HOME of the stack, where the agent's runtime state lives (for finding containers). */
  ternHome: string;
  /** Own stack only: its NATS namespace on NATS_URL (benches that read its events or stores). */
  namespace?: string;
  /**
   * Stops what this bench started: its own stack, or on an existing stack the deployments it
   * made (a bench's `min_containers: 1` deployment left behind holds a core and fails the next bench).
   * Runs once: on Ctrl-C or SIGTERM too, before the bench exits (stopOnInterrupt).
   */
  stop(): Promise<void>;
  /** The deployments deploy() made on this stack. */
  readonly deployed: Set<string>;
  /** Has stop() end this too, first (the last added first): a bench's helper processes. */
  alsoStop(stop: () => Promise<void>): void;
  /** Own stack only: the pid of each service (from run.json). */
  pids(): Promise<Record<string, number>>;
}

export interface StackOptions {
  gateway?: string;
  token?: string;
  ternHome?: string;
  log?: (msg: string) => void;
  /** Own stack only: the agent's container network (AGENT_NETWORK); default the agent's own default, private. */
  network?: BenchNetwork;
  /** Own stack only: more environment for the services (a profiler preload, say). */
  env?: NodeJS.ProcessEnv;
}

export type BenchNetwork = 'private' | 'host';

/** `--network private,host` → the modes to measure back to back, in that order. */
export function benchNetworks(arg: string): BenchNetwork[] {
  const modes = arg.split(',').map((m) => m.trim());
  for (const m of modes) if (m !== 'private' && m !== 'host') throw new Error(`--network takes private, host or both (got "${m}")`);
  return modes as BenchNetwork[];
}

/** Own stack unless gateway and token are given. */
export async function openStack(o: StackOptions): Promise<Stack> {
  const log = o.log ?? ((m: string) => console.error(m));
  const stack = await startOrFind(o, log);
  const helpers: (() => Promise<void>)[] = [];
  const stop = stopOnInterrupt(async () => {
    for (const helper of helpers) await helper().catch((e: unknown) => log(`could not stop a helper: ${(e as Error).message}`));
    await stack.stop();
  }, log);
  return { ...stack, stop, alsoStop: (helper) => void helpers.unshift(helper) };
}

async function startOrFind(o: StackOptions, log: (m: string) => void): Promise<Omit<Stack, 'alsoStop'>> {
  if (o.gateway) {
    if (!o.token) throw new Error('--gateway needs --token');
    const deployed = new Set<string>();
    const gateway = o.gateway.replace(/\/+$/, '');
    const token = o.token;
    return {
      gateway,
      token,
      ternHome: o.ternHome ?? join(ROOT, '.tern'),
      deployed,
      stop: async () => {
        for (const name of deployed) {
          const res = await fetch(`${gateway}/api/v1/deployments/${encodeURIComponent(name)}`, {
            method: 'DELETE',
            headers: { authorization: `Bearer ${token}` },
          }).catch((e: Error) => ({ ok: false, status: e.message }));
          if (res.ok || res.status === 404) log(`deleted the bench's deployment ${name}`);
          else log(`could not delete the bench's deployment ${name} (${res.status}): delete it with \`tern deployment delete ${name}\``);
        }
      },
      pids: () => Promise.reject(new Error('service pids are known for an own stack only')),
    };
  }
  const tag = `bench${randomBytes(4).toString('hex')}`;
  // Its own bridge and range, so it never shares one with an agent already on this machine.
  const bridge = `tb${tag.slice(5)}`;
  const ternHome = await mkdtemp(join(tmpdir(), 'tern-bench-home-'));
  const home = await mkdtemp(join(tmpdir(), 'tern-bench-user-'));
  const natsUrl = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';
  const databaseUrl = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    TERN_HOME: ternHome,
    HOME: home,
    NATS_URL: natsUrl,
    NATS_NAMESPACE: tag,
    DATABASE_URL: databaseUrl,
    DATABASE_SCHEMA: tag,
    TERN_GATEWAY_PORT: '0',
    TERN_SKIP_INSTALL: '1',
    TERN_SKIP_BUILD: '1',
    NO_COLOR: '1',
    LOG_LEVEL: process.env.LOG_LEVEL ?? 'warn',
    AGENT_BRIDGE: bridge,
    AGENT_NETWORK_SUBNET: `10.${64 + (parseInt(tag.slice(5, 7), 16) % 64)}.${parseInt(tag.slice(7, 9), 16)}.0/24`,
    ...(o.network ? { AGENT_NETWORK: o.network } : {}),
    ...o.env,
  };
  const script = (name: string) => execa(process.execPath, [join(ROOT, 'scripts', name)], { cwd: ROOT, env, reject: false, all: true });
  const t0 = performance.now();
  log(`starting a stack (TERN_HOME ${ternHome}, namespace/schema ${tag}, container network ${o.network ?? 'private'})`);
  const stop = async () => {
    log('stopping the stack');
    await killAgentContainers(ternHome);
    const down = await script('down.mjs');
    if (down.exitCode !== 0) log(`down.mjs: ${down.all}`);
    await killAgentContainers(ternHome);
    // The agent's bridge, tables and the namespaces it still leases (its spares).
    for (const d of existsSync(join(ternHome, 'agent')) ? readdirSync(join(ternHome, 'agent')) : [])
      await new BridgeNetwork({ bridge, stateDir: join(ternHome, 'agent', d, 'network') }).destroy().catch(() => undefined);
    await execa('ip', ['link', 'del', bridge], { reject: false });
    const pg = (await import('pg')).default;
    const db = new pg.Client({ connectionString: databaseUrl });
    await db.connect();
    await db.query(`DROP SCHEMA IF EXISTS "${tag}" CASCADE`);
    await db.end();
    const { connect } = await import('@nats-io/transport-node');
    const { jetstreamManager } = await import('@nats-io/jetstream');
    const nc = await connect({ servers: natsUrl, name: 'tern-bench-cleanup' });
    const jsm = await jetstreamManager(nc);
    const names: string[] = [];
    for await (const name of jsm.streams.names())
      if ([`${tag}_`, `KV_${tag}_`, `OBJ_${tag}_`].some((p) => name.startsWith(p))) names.push(name);
    for (const name of names) await jsm.streams.delete(name).catch(() => undefined);
    await nc.close();
    await rm(ternHome, { recursive: true, force: true });
    await rm(home, { recursive: true, force: true });
  };
  const pids = async () => {
    const run = JSON.parse(await readFile(join(ternHome, 'run.json'), 'utf8')) as { services: Record<string, { pid: number }> };
    return Object.fromEntries(Object.entries(run.services).map(([name, s]) => [name, s.pid]));
  };
  return { ternHome, namespace: tag, stop, pids, deployed: new Set(), ...(await upDetached(env, ternHome, t0, log, stop)) };
}

async function upDetached(env: NodeJS.ProcessEnv, ternHome: string, t0: number, log: (m: string) => void, stop: () => Promise<void>) {
  const r = await execa(process.execPath, [join(ROOT, 'scripts', 'up.mjs'), '--detach'], { cwd: ROOT, env, reject: false, all: true });
  if (r.exitCode !== 0) {
    log(r.all ?? '');
    await stop();
    throw new Error(`up.mjs --detach failed (${r.exitCode})`);
  }
  const run = JSON.parse(await readFile(join(ternHome, 'run.json'), 'utf8')) as { gatewayUrl: string };
  const creds = JSON.parse(await readFile(join(ternHome, 'credentials.json'), 'utf8')) as { adminToken: string };
  log(`stack up in ${((performance.now() - t0) / 1000).toFixed(1)} s: ${run.gatewayUrl}`);
  return { gateway: run.gatewayUrl, token: creds.adminToken };
}

/** Containers the agent left behind (they outlive the agent by design). */
export async function killAgentContainers(ternHome: string): Promise<void> {
  for (const d of existsSync(join(ternHome, 'agent')) ? readdirSync(join(ternHome, 'agent')) : []) {
    const root = join(ternHome, 'agent', d, 'runtime', 'runc');
    if (!existsSync(root)) continue;
    const list = await execa('runc', ['--root', root, 'list', '-q'], { reject: false });
    for (const id of (list.stdout ?? '').split('\n').filter(Boolean))
      await execa('runc', ['--root', root, 'delete', '--force', id], { reject: false });
  }
}

export async function api<T>(s: Stack, method: string, path: string, body?: unknown): Promise<T> {
  const res = await fetch(`${s.gateway}${path}`, {
    method,
    headers: { authorization: `Bearer ${s.token}`, ...(body ? { 'content-type': 'application/json' } : {}) },
    ...(body ? { body: JSON.stringify(body) } : {}),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${text}`);
  return (text ? JSON.parse(text) : undefined) as T;
}

export interface DeploymentView {
  desired: number;
  actual: number;
  state: string;
  reason: string | null;
  containers: { containerId?: string; id?: string; state?: string }[];
}

/** The bench's endpoint: returns a small JSON, like examples/hello-python without the hostname. */
const APP = `def predict(payload):\n    return {"hello": payload.get("name", "world")}\n`;

/** The bench handler's source, for benches that run it outside Tern too. */
export const BENCH_APP = APP;

/** Deploys a one-file Python endpoint (or task queue; `app.py`, the bench handler unless given) through the CLI (`tern deploy`), as a user would. */
export async function deploy(
  s: Stack,
  name: string,
  yaml: string,
  kind: 'endpoint' | 'task_queue' | 'function' = 'endpoint',
  app = APP,
): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'tern-bench-app-'));
  try {
    await writeFile(join(dir, 'app.py'), app);
    await writeFile(join(dir, 'tern.yaml'), `name: ${name}\nkind: ${kind}\nhandler: app.py:predict\n${yaml}`);
    s.deployed.add(name);
    await execa(process.execPath, [join(ROOT, 'bin', 'tern.js'), 'deploy', join(dir, 'tern.yaml')], {
      env: { ...process.env, TERN_GATEWAY: s.gateway, TERN_TOKEN: s.token },
      all: true,
    });
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

export async function until<T>(what: string, timeoutMs: number, fn: () => Promise<T | undefined>, intervalMs = 100): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  while (Date.now() < deadline) {
    try {
      const v = await fn();
      if (v !== undefined) return v;
    } catch (e) {
      last = e;
    }
    await sleep(intervalMs);
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${last ? `: ${String(last)}` : ''}`);
}

/**
 * The bundle config.json of a runtime container, found under <TERN_HOME>/agent/<dir>/runtime/containers/<id>/,
 * with its $PORT and the address it listens on (its own on a private network, else loopback).
 */
export async function containerConfig(
  ternHome: string,
  containerId: string,
): Promise<{ path: string; config: any; port: number; address: string }> {
  const agentRoot = join(ternHome, 'agent');
  for (const d of existsSync(agentRoot) ? readdirSync(agentRoot) : []) {
    const path = join(agentRoot, d, 'runtime', 'containers', containerId, 'config.json');
    if (!existsSync(path)) continue;
    const config = JSON.parse(await readFile(path, 'utf8'));
    const env: string[] = config.process?.env ?? [];
    const port = Number(env.find((e) => e.startsWith('PORT='))?.slice(5));
    if (!port) throw new Error(`${path}: no PORT in the process env`);
    return { path, config, port, address: config.annotations?.['dev.tern.address'] ?? '127.0.0.1' };
  }
  throw new Error(`no bundle for container ${containerId} under ${agentRoot}/*/runtime/containers (pass --tern-home or --port)`);
}

export interface HttpTarget {
  url: string;
  headers?: Record<string, string>;
}

export interface Result {
  label: string;
  concurrency: number;
  p50: number;
  p99: number;
  rps: number;
  errors: number;
}

/** One POST with a keep-alive agent; resolves with the status and the response headers. */
export function post(agent: Agent, t: HttpTarget, body: Buffer): Promise<HttpAnswer> {
  // A request the server never reads (seen with the Python runner's keep-alive connections)
  // must not stall the whole bench: give up after 5 s and count it as an error.
  return send(agent, 'POST', t, body, 5_000);
}

export interface HttpAnswer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/** One request with a keep-alive agent (a JSON body when given); rejects on a connection error or after timeoutMs. */
export function send(agent: Agent, method: string, t: HttpTarget, body: Buffer | undefined, timeoutMs: number): Promise<HttpAnswer> {
  return new Promise((resolve, reject) => {
    const headers = { ...(body ? { 'content-type': 'application/json', 'content-length': body.length } : {}), ...t.headers };
    const req = request(t.url, { method, agent, headers }, (res) => {
      let data = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (data += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: data }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.setTimeout(timeoutMs, () => req.destroy(new Error(`timeout after ${timeoutMs / 1000} s`)));
    req.end(body);
  });
}

/** Closed-loop load: `concurrency` workers, each sending the next request when its last one is answered. */
export async function load(
  label: string,
  t: HttpTarget,
  body: Buffer,
  requests: number,
  concurrency: number,
  warmup = 200,
): Promise<Result> {
  const agent = new Agent({ keepAlive: true, maxSockets: concurrency });
  try {
    let errors = 0;
    const once = async () => {
      const r = await post(agent, t, body).catch(() => undefined);
      if (r?.status !== 200) errors++;
    };
    let w = 0;
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (w++ < warmup) await once();
      }),
    );
    errors = 0;
    const times: number[] = [];
    let next = 0;
    const started = performance.now();
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (next++ < requests) {
          const t0 = performance.now();
          await once();
          times.push(performance.now() - t0);
        }
      }),
    );
    const wall = (performance.now() - started) / 1000;
    return { label, concurrency, p50: quantile(times, 0.5), p99: quantile(times, 0.99), rps: times.length / wall, errors };
  } finally {
    agent.destroy();
  }
}

/** CPU time (user + system) the processes and their children have used so far, in ms (/proc, clock-tick resolution). */
export async function cpuMs(pids: number[]): Promise<number> {
  let ticks = 0;
  for (const pid of pids) ticks += await cpuTicks(pid);
  return (ticks * 1000) / CLOCK_TICKS;
}

/**
 * CPU seconds a process (`self`: this one) and its children that have ended (tar, zstd, gzip)
 * have used: utime + stime + cutime + cstime.
 */
export async function cpuSeconds(pid: number | 'self' = 'self'): Promise<number> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return fields.slice(11, 15).reduce((n, f) => n + Number(f), 0) / CLOCK_TICKS;
}

/** USER_HZ: Linux reports process times in these (100 on every mainstream build). */
const CLOCK_TICKS = 100;

async function cpuTicks(pid: number): Promise<number> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => '');
  // Fields after the command's closing parenthesis: utime and stime are the 12th and 13th.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  let ticks = Number(fields[11] ?? 0) + Number(fields[12] ?? 0);
  const children = await readFile(`/proc/${pid}/task/${pid}/children`, 'utf8').catch(() => '');
  for (const child of children.split(' ').filter(Boolean)) ticks += await cpuTicks(Number(child));
  return ticks;
}

export function quantile(xs: number[], q: number): number {
  const s = [...xs].sort((a, b) => a - b);
  const pos = (s.length - 1) * q;
  const lo = Math.floor(pos);
  return s[lo]! + (s[Math.ceil(pos)]! - s[lo]!) * (pos - lo);
}

/** Runs `nginx` in the foreground (daemon off) proxying a free port to 127.0.0.1:<upstream> with keep-alive upstream connections. */
export async function startNginx(
  upstreamPort: number,
  freePort: () => Promise<number>,
  upstreamHost = '127.0.0.1',
): Promise<{ url: string; pid: number; stop: () => Promise<void> }> {
  const which = await execa('sh', ['-c', 'command -v nginx || ls /usr/sbin/nginx'], { reject: false });
  const bin = which.stdout.split('\n')[0]?.trim();
  if (!bin) throw new Error('nginx not found: apt-get install -y nginx-light');
  const dir = await mkdtemp(join(tmpdir(), 'tern-bench-nginx-'));
  const port = await freePort();
  const conf = `daemon off;
worker_processes 1;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log warn;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path ${dir}/body; proxy_temp_path ${dir}/proxy; fastcgi_temp_path ${dir}/fcgi; uwsgi_temp_path ${dir}/uwsgi; scgi_temp_path ${dir}/scgi;
  upstream container { server ${upstreamHost}:${upstreamPort}; keepalive 64; }
  server {
    listen 127.0.0.1:${port};
    keepalive_requests 100000;
    location / { proxy_pass http://container; proxy_http_version 1.1; proxy_set_header Connection ""; proxy_buffering off; }
  }
}
`;
  await writeFile(join(dir, 'nginx.conf'), conf);
  const child = spawn(bin, ['-p', dir, '-c', join(dir, 'nginx.conf'), '-e', join(dir, 'error.log')], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (d) => (stderr += d));
  const url = `http://127.0.0.1:${port}/`;
  await until(
    'nginx to listen',
    10_000,
    async () => {
      if (child.exitCode !== null) throw new Error(`nginx exited: ${stderr}`);
      const r = await fetch(url, { method: 'POST', body: '{}' }).catch(() => undefined);
      return r ? true : undefined;
    },
    50,
  );
  return {
    url,
    pid: child.pid!,
    stop: async () => {
      child.kill('SIGQUIT');
      await new Promise((r) => (child.exitCode !== null ? r(undefined) : child.once('exit', r)));
      await rm(dir, { recursive: true, force: true });
    },
  };
}
