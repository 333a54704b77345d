/**
 * End-to-end invoke latency: one warm container of a tiny Python endpoint (min_containers 1),
 * called (a) straight on its $PORT (the floor), (b) through the gateway's /endpoint/<name>
 * (HTTP → gateway → NATS → agent → HTTP), (c) through nginx proxying to the same port
 * (keep-alive upstream, 1 worker): the cost of a conventional reverse proxy, for scale, (d)
 * through relay.ts: the gateway's topology (HTTP → Node → NATS → Node → HTTP) with none of Tern's
 * work, the floor of the design. Each at concurrency 1 and N, in one run. Prints
 * p50/p99/throughput and the ratios; not a test. The two-process CPU column is the gateway +
 * the agent for the gateway's row, the relay's front + back for its own.
 *
 *   npm run build && node dist/bench/invoke/e2e.js [--requests 2000] [--concurrency 16] [--network private,host]
 *       [--gateway URL --token T [--tern-home DIR | --port P]] [--profile DIR]
 *
 * Own stacks: one per container network mode (the agent's AGENT_NETWORK), back to back.
 *
 * Without --gateway it starts its own stack (scripts/up.mjs --detach, temp TERN_HOME, the shared
 * NATS_URL/DATABASE_URL with its own namespace and schema) and removes it afterwards. Needs root,
 * runc and nginx (apt-get install -y nginx-light).
 *
 * --profile DIR (own stack): the gateway's and the agent's CPU profiles of the gateway rows (both
 * concurrencies), written to DIR through cpu-profile.mjs; summarise with cpu-top.js.
 */
import 'reflect-metadata';
import { Agent } from 'node:http';
import { fileURLToPath } from 'node:url';
import { benchArgs } from '../args.js';
import { freePort } from '#tern/runtime';
import {
  api,
  type BenchNetwork,
  benchNetworks,
  containerConfig,
  cpuMs,
  deploy,
  type DeploymentView,
  load,
  openStack,
  post,
  type Result,
  sleep,
  type Stack,
  startNginx,
  until,
} from './stack.js';
import { startRelay } from './relay.js';

const values = benchArgs(
  `Usage: node dist/bench/invoke/e2e.js [--requests 2000] [--concurrency 16] [--network private,host]
    [--gateway URL --token T [--tern-home DIR | --port P]] [--profile DIR]`,
  {
    requests: { type: 'string', default: '2000' },
    concurrency: { type: 'string', default: '16' },
    gateway: { type: 'string' },
    token: { type: 'string' },
    'tern-home': { type: 'string' },
    port: { type: 'string' },
    name: { type: 'string', default: 'bench-e2e' },
    network: { type: 'string', default: 'private,host' },
    profile: { type: 'string' },
  },
);
const REQUESTS = Number(values.requests);
const CONCURRENCY = Number(values.concurrency);
const NAME = values.name!;
const BODY = Buffer.from(JSON.stringify({ name: 'Ada' }));
const PROFILED = ['gateway', 'agent'];
/** load()'s default warm-up. */
const WARMUP = 200;

/** The services' environment for --profile: the preload that profiles between two SIGWINCHs. */
function profilerEnv(dir: string): NodeJS.ProcessEnv {
  const preload = fileURLToPath(new URL('../../../bench/invoke/cpu-profile.mjs', import.meta.url));
  return {
    NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --import=${preload}`.trim(),
    TERN_CPU_PROFILE_DIR: dir,
    TERN_CPU_PROFILE_MATCH: PROFILED.map((s) => `apps/${s}/`).join(','),
  };
}

/** Starts or stops (and writes) the profiles of the profiled services. */
async function toggleProfiles(stack: Stack): Promise<void> {
  const pids = await stack.pids();
  for (const s of PROFILED) if (pids[s]) process.kill(pids[s], 'SIGWINCH');
}

type Row = (Result & { cpuUs?: number; cpuEach?: number[] }) | { label: string; concurrency: number; ratio: [number, number, number] };

/** How long the processes' idle CPU is measured before a row, to take it out of the row's figure. */
const IDLE_SAMPLE_MS = 2000;

/**
 * A load's result with the CPU the given processes spent on it, per request (none without
 * pids): their CPU during the row (warm-up included) less what they use idle (tickers, KV
 * watches, heartbeats), sampled just before; in all and per process, in the order given.
 */
async function withCpu(pids: number[], run: () => Promise<Result>): Promise<Result & { cpuUs?: number; cpuEach?: number[] }> {
  if (!pids.length) return run();
  const each = () => Promise.all(pids.map((pid) => cpuMs([pid])));
  const idleFrom = await each();
  await sleep(IDLE_SAMPLE_MS);
  const before = await each();
  const t0 = performance.now();
  const result = await run();
  const elapsed = performance.now() - t0;
  const after = await each();
  const cpuEach = pids.map((_, i) => {
    const idlePerMs = (before[i]! - idleFrom[i]!) / IDLE_SAMPLE_MS;
    const busy = after[i]! - before[i]! - idlePerMs * elapsed;
    return (Math.max(0, busy) * 1000) / (REQUESTS + WARMUP);
  });
  return { ...result, cpuUs: cpuEach.reduce((a, b) => a + b, 0), cpuEach };
}

async function measure(network: BenchNetwork | undefined): Promise<void> {
  const profile = values.profile && !values.gateway ? values.profile : undefined;
  const stack = await openStack({
    gateway: values.gateway,
    token: values.token,
    ternHome: values['tern-home'],
    network,
    env: profile ? profilerEnv(profile) : undefined,
  });
  const cleanups: (() => Promise<void>)[] = [];
  try {
    // One container, always warm, allowed to take N requests at once so no path is throttled by
    // the runner's own admission; 2 CPUs so the CFS quota is not what is measured.
    const t0 = performance.now();
    await deploy(
      stack,
      NAME,
      `concurrent_requests: ${CONCURRENCY}\nworkers: 1\ncpu: 2\nmemory: 256Mi\nkeep_warm_seconds: 600\nautoscaler:\n  type: queue_depth\n  min_containers: 1\n  max_containers: 1\n`,
    );
    cleanups.push(async () => void (await api(stack, 'DELETE', `/api/v1/deployments/${NAME}`).catch(() => undefined)));
    const gw = { url: `${stack.gateway}/endpoint/${NAME}`, headers: { authorization: `Bearer ${stack.token}` } };
    const agent = new Agent({ keepAlive: true });
    const first = await until(
      'the first answer through the gateway',
      120_000,
      async () => {
        const r = await post(agent, gw, BODY);
        return r.status === 200 ? r : undefined;
      },
      250,
    );
    agent.destroy();
    console.error(`deployed and answering in ${((performance.now() - t0) / 1000).toFixed(1)} s: ${first.body}`);
    const containerId = String(first.headers['x-tern-container-id'] ?? '');
    const found = values.port ? undefined : await containerConfig(stack.ternHome, containerId);
    const port = values.port ? Number(values.port) : found!.port;
    // On a private network the container listens on its own address, which the host reaches.
    const address = found?.address ?? '127.0.0.1';
    const view = await api<DeploymentView>(stack, 'GET', `/api/v1/deployments/${NAME}`);
    console.error(`container ${containerId} on ${address}:${port}; deployment desired ${view.desired}, actual ${view.actual}`);

    const nginx = await startNginx(port, freePort, address);
    cleanups.push(nginx.stop);
    const direct = { url: `http://${address}:${port}/` };
    const viaNginx = { url: nginx.url };
    const relay = await startRelay(process.env.NATS_URL ?? 'nats://127.0.0.1:4222', `http://${address}:${port}`, await freePort());
    cleanups.push(relay.stop);
    const viaRelay = { url: relay.url };

    // CPU per request of the proxies (nginx; the gateway and the agent), which the machine's load
    // does not inflate the way it does latencies. NATS is shared with other stacks: not counted.
    const pids: Record<string, number | undefined> = values.gateway ? {} : await stack.pids();
    // In PROFILED's order (gateway, agent): the split column reads the same way.
    const tern = PROFILED.map((s) => pids[s]).filter((pid): pid is number => !!pid);
    const rows: Row[] = [];
    for (const c of [1, CONCURRENCY]) {
      const d = await load('direct (container port)', direct, BODY, REQUESTS, c);
      const n = await withCpu([nginx.pid], () => load('nginx → container', viaNginx, BODY, REQUESTS, c));
      if (profile) await toggleProfiles(stack);
      const g = await withCpu(tern, () => load('gateway /endpoint', gw, BODY, REQUESTS, c));
      if (profile) await toggleProfiles(stack);
      const f = await withCpu(relay.pids, () => load('relay floor (NATS + 2 Node)', viaRelay, BODY, REQUESTS, c));
      rows.push(d, n, g, f);
      rows.push({ label: 'ratio gateway/direct', concurrency: c, ratio: [g.p50 / d.p50, g.p99 / d.p99, g.rps / d.rps] });
      rows.push({ label: 'ratio gateway/nginx', concurrency: c, ratio: [g.p50 / n.p50, g.p99 / n.p99, g.rps / n.rps] });
      rows.push({ label: 'ratio nginx/direct', concurrency: c, ratio: [n.p50 / d.p50, n.p99 / d.p99, n.rps / d.rps] });
      rows.push({ label: 'ratio gateway/relay floor', concurrency: c, ratio: [g.p50 / f.p50, g.p99 / f.p99, g.rps / f.rps] });
      rows.push({ label: 'ratio relay floor/nginx', concurrency: c, ratio: [f.p50 / n.p50, f.p99 / n.p99, f.rps / n.rps] });
    }
    console.log(
      `\nend-to-end invoke, warm Python runner container (network ${found?.config.linux.namespaces.some((n: { type: string }) => n.type === 'network') ? 'private' : 'host'}), ${REQUESTS} requests per row (+200 warm-up), body ${BODY.length} B, keep-alive client`,
    );
    console.log(
      [
        'path'.padEnd(28),
        'conc'.padStart(5),
        'p50 ms'.padStart(9),
        'p99 ms'.padStart(9),
        'req/s'.padStart(9),
        'errors'.padStart(7),
        'cpu µs/req'.padStart(11),
        'two processes'.padStart(16),
      ].join(' '),
    );
    for (const r of rows) {
      if ('ratio' in r) {
        const [a, b, x] = r.ratio;
        console.log(
          [
            r.label.padEnd(28),
            String(r.concurrency).padStart(5),
            `×${a.toFixed(2)}`.padStart(9),
            `×${b.toFixed(2)}`.padStart(9),
            `×${x.toFixed(2)}`.padStart(9),
          ].join(' '),
        );
      } else {
        console.log(
          [
            r.label.padEnd(28),
            String(r.concurrency).padStart(5),
            r.p50.toFixed(2).padStart(9),
            r.p99.toFixed(2).padStart(9),
            r.rps.toFixed(0).padStart(9),
            String(r.errors).padStart(7),
            (r.cpuUs === undefined ? '' : r.cpuUs.toFixed(0)).padStart(11),
            (r.cpuEach && r.cpuEach.length > 1 ? r.cpuEach.map((u) => u.toFixed(0)).join(' + ') : '').padStart(16),
          ].join(' '),
        );
      }
    }
  } finally {
    for (const c of cleanups.reverse()) await c().catch((e) => console.error(`cleanup: ${String(e)}`));
    await stack.stop();
  }
}

for (const mode of values.gateway ? [undefined] : benchNetworks(values.network!)) await measure(mode);
process.exit(0);
