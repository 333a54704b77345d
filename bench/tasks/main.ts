/**
 * Task queues end to end: submit → complete, trivial handler, durable, through Tern vs BullMQ on
 * the local Redis, measured in the same run. Three systems run the same Python handler
 * (`predict(payload)` returning a small dict):
 *   tern            POST /taskqueue/<name> → row + TASKS → agent → runner in a runc container,
 *                   result recorded in Postgres; the client waits with GET /api/v1/tasks/<id>/wait
 *   bullmq+runner   Queue.add → Redis → Worker → HTTP to the same Python runner (outside a
 *                   container) → result in Redis; the client waits with job.waitUntilFinished
 *   bullmq          the same without the HTTP hop: the handler is a JavaScript function in the
 *                   worker (the floor BullMQ users usually measure)
 * Slots are equal: the Tern queue runs one container with --slots workers; the BullMQ workers
 * have concurrency --slots. Two figures per system: latency (one task at a time: p50/p95 of
 * submit → result seen by the client) and throughput (--tasks submitted by --clients
 * concurrent clients, time until all results are seen). Prints ratios; not a test.
 *
 * BullMQ → runner runs twice: on the Redis given (usually without persistence) and on a second
 * Redis the bench starts on a free port with `appendonly yes` / `appendfsync everysec`, so a
 * durable Tern is also compared with a BullMQ that keeps its jobs across a crash (all but the
 * last second of them, which is as durable as a Redis gets without fsync on every write).
 *
 *   npm run build && node dist/bench/tasks/main.js [--tasks 2000] [--latency 200] [--clients 32] [--slots 4]
 *       [--redis redis://127.0.0.1:6379] [--redis-server redis-server] [--gateway URL --token T]
 *
 * Without --gateway it starts its own stack (as bench/invoke/e2e.ts) and removes it afterwards.
 * Needs root, runc and a Redis server.
 */
import 'reflect-metadata';
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { Agent } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { benchArgs } from '../args.js';
import { Queue, QueueEvents, Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { freePort } from '#tern/runtime';
import { api, BENCH_APP, deploy, type DeploymentView, openStack, quantile, ROOT, send, sleep, type Stack, until } from '../invoke/stack.js';
import { durableFloor } from './floor.js';
import { duringWork, printServiceCpu, type ServiceCpu } from '../invoke/service-cpu.js';

const values = benchArgs(
  `Usage: node dist/bench/tasks/main.js [--tasks 2000] [--latency 200] [--clients 32] [--slots 4]
    [--redis redis://127.0.0.1:6379] [--redis-server redis-server] [--gateway URL --token T]`,
  {
    tasks: { type: 'string', default: '2000' },
    latency: { type: 'string', default: '200' },
    clients: { type: 'string', default: '32' },
    slots: { type: 'string', default: '4' },
    redis: { type: 'string', default: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379' },
    'redis-server': { type: 'string', default: 'redis-server' },
    gateway: { type: 'string' },
    token: { type: 'string' },
    name: { type: 'string', default: 'bench-tasks' },
  },
);
const TASKS = Number(values.tasks);
const LATENCY_RUNS = Number(values.latency);
const CLIENTS = Number(values.clients);
const SLOTS = Number(values.slots);
const NAME = values.name!;

/** One system under test: submit a payload, resolve when its result is seen by the client. */
interface System {
  label: string;
  run(payload: { name: string }): Promise<unknown>;
  close(): Promise<void>;
}

interface Figures {
  label: string;
  p50: number;
  p95: number;
  throughput: number;
  seconds: number;
}

async function measure(s: System): Promise<Figures> {
  for (let i = 0; i < 20; i++) await s.run({ name: `warm-${i}` });
  const latencies: number[] = [];
  for (let i = 0; i < LATENCY_RUNS; i++) {
    const t0 = performance.now();
    await s.run({ name: `l-${i}` });
    latencies.push(performance.now() - t0);
  }
  let next = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: CLIENTS }, async () => {
      while (next < TASKS) await s.run({ name: `t-${next++}` });
    }),
  );
  const seconds = (performance.now() - t0) / 1000;
  const f = { label: s.label, p50: quantile(latencies, 0.5), p95: quantile(latencies, 0.95), throughput: TASKS / seconds, seconds };
  console.error(`${f.label}: p50 ${f.p50.toFixed(1)} ms, p95 ${f.p95.toFixed(1)} ms, ${f.throughput.toFixed(0)} tasks/s`);
  return f;
}

/** Tern: submit over HTTP, then long-poll the task until it is done. */
async function tern(stack: Stack): Promise<System> {
  await deploy(
    stack,
    NAME,
    `workers: ${SLOTS}\ncpu: 1\nmemory: 256Mi\nautoscaler:\n  type: queue_depth\n  min_containers: 1\n  max_containers: 1\n`,
    'task_queue',
  );
  await until(
    'a warm container',
    120_000,
    async () => ((await api<DeploymentView>(stack, 'GET', `/api/v1/deployments/${NAME}`)).actual >= 1 ? true : undefined),
    250,
  );
  const agent = new Agent({ keepAlive: true, maxSockets: CLIENTS * 2 });
  const headers = { authorization: `Bearer ${stack.token}` };
  return {
    label: 'tern',
    async run(payload) {
      const submitted = JSON.parse(await http(agent, 'POST', `${stack.gateway}/taskqueue/${NAME}`, headers, JSON.stringify(payload))) as {
        task_id: string;
      };
      for (;;) {
        const t = JSON.parse(await http(agent, 'GET', `${stack.gateway}/api/v1/tasks/${submitted.task_id}/wait?timeout=30`, headers)) as {
          done: boolean;
          status: string;
          result: unknown;
        };
        if (!t.done) continue;
        if (t.status !== 'COMPLETE') throw new Error(`task ${submitted.task_id} ended ${t.status}`);
        return t.result;
      }
    },
    close: async () => agent.destroy(),
  };
}

/** BullMQ on Redis; the worker runs the handler in-process or calls the Python runner over HTTP. */
async function bullmq(redisUrl: string, runnerPort?: number, label?: string): Promise<System> {
  // Native ESM: BullMQ wants client instances, one per queue, worker and event listener.
  const clients: Redis[] = [];
  const connection = () => {
    const client = new Redis(redisUrl, { maxRetriesPerRequest: null });
    clients.push(client);
    return client;
  };
  const queueName = `tern-bench-${randomBytes(4).toString('hex')}`;
  const queue = new Queue(queueName, { connection: connection() });
  const events = new QueueEvents(queueName, { connection: connection() });
  await events.waitUntilReady();
  const agent = new Agent({ keepAlive: true, maxSockets: SLOTS });
  const handler = runnerPort
    ? async (data: unknown) => JSON.parse(await http(agent, 'POST', `http://127.0.0.1:${runnerPort}/`, {}, JSON.stringify(data))) as unknown
    : async (data: { name?: string }) => ({ hello: data.name ?? 'world' });
  const worker = new Worker(queueName, async (job) => handler(job.data), { connection: connection(), concurrency: SLOTS });
  await worker.waitUntilReady();
  return {
    label: label ?? (runnerPort ? 'bullmq+runner' : 'bullmq'),
    async run(payload) {
      // Durable like a Tern task: kept until it has a result, retried on failure.
      const job = await queue.add('task', payload, { attempts: 4, backoff: { type: 'exponential', delay: 1000 }, removeOnComplete: 1000 });
      return job.waitUntilFinished(events, 60_000);
    },
    async close() {
      await worker.close();
      await events.close();
      await queue.obliterate({ force: true });
      await queue.close();
      for (const c of clients) c.disconnect();
      agent.destroy();
    },
  };
}

/** Ends a helper process the bench started and removes its working directory. */
async function stopAndRemove(child: ChildProcess, dir: string): Promise<void> {
  child.kill('SIGTERM');
  await sleep(300);
  await rm(dir, { recursive: true, force: true });
}

/** The Tern Python runner serving the bench handler on loopback, as in a container but bare. */
async function startRunner(): Promise<{ port: number; stop: () => Promise<void> }> {
  const dir = await mkdtemp(join(tmpdir(), 'tern-bench-runner-'));
  await writeFile(join(dir, 'app.py'), BENCH_APP);
  const port = await freePort();
  const child = spawn('python3', [join(ROOT, 'runners', 'python', 'tern_runner.py')], {
    cwd: dir,
    env: { ...process.env, PORT: String(port), TERN_HANDLER: 'app.py:predict', TERN_WORKERS: String(SLOTS) },
    stdio: 'ignore',
  });
  await until(
    'the runner',
    30_000,
    async () => ((await fetch(`http://127.0.0.1:${port}/health`).catch(() => undefined))?.ok ? true : undefined),
    100,
  );
  return {
    port,
    stop: () => stopAndRemove(child, dir),
  };
}

/**
 * A Redis of the bench's own on a free port that appends every write to its log and fsyncs it
 * once a second: BullMQ made durable (its jobs survive kill -9 of Redis, less the last second).
 */
async function startDurableRedis(): Promise<{ url: string; stop: () => Promise<void> }> {
  const dir = await mkdtemp(join(tmpdir(), 'tern-bench-redis-'));
  const port = await freePort();
  const child = spawn(
    values['redis-server']!,
    ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--appendonly', 'yes', '--appendfsync', 'everysec', '--save', ''],
    { stdio: 'ignore' },
  );
  const url = `redis://127.0.0.1:${port}`;
  await until(
    'the durable Redis',
    30_000,
    async () => {
      const probe = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
      probe.on('error', () => undefined); // not listening yet: connect() rejects, and until() asks again
      try {
        await probe.connect();
        const [, appendonly] = (await probe.config('GET', 'appendonly')) as string[];
        return appendonly === 'yes' ? true : undefined;
      } finally {
        probe.disconnect();
      }
    },
    100,
  );
  return {
    url,
    stop: () => stopAndRemove(child, dir),
  };
}

/** A request that must succeed (2xx); its body. Long polls wait up to 30 s, so give them 60. */
async function http(agent: Agent, method: string, url: string, headers: Record<string, string>, body?: string): Promise<string> {
  const r = await send(agent, method, { url, headers }, body === undefined ? undefined : Buffer.from(body), 60_000);
  if (r.status < 200 || r.status >= 300) throw new Error(`${method} ${url}: ${r.status} ${r.body}`);
  return r.body;
}

const stack = await openStack({ gateway: values.gateway, token: values.token });
const results: Figures[] = [];
/** CPU each service of the stack (with its child processes) spent during the Tern phase. */
let ternCpu: ServiceCpu = {};
/** A helper process started: stack.stop() ends it (on Ctrl-C too), the last started first. */
const started = <T extends { stop(): Promise<void> }>(helper: T): T => (stack.alsoStop(() => helper.stop()), helper);
try {
  const runner = started(await startRunner());
  const durableRedis = started(await startDurableRedis());
  for (const make of [
    () => tern(stack),
    () => bullmq(values.redis!, runner.port),
    () => bullmq(durableRedis.url, runner.port, 'bullmq+runner aof'),
    () => bullmq(values.redis!),
    () =>
      durableFloor({
        natsUrl: process.env.NATS_URL ?? 'nats://127.0.0.1:4222',
        databaseUrl: process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test',
        runnerPort: runner.port,
        slots: SLOTS,
      }),
  ]) {
    const system = await make();
    try {
      const { value, cpu } = await duringWork(stack, system.label === 'tern' && !values.gateway, () => measure(system));
      results.push(value);
      if (system.label === 'tern') ternCpu = cpu;
    } finally {
      await system.close();
    }
  }
} finally {
  await stack.stop();
}

const [t, viaRunner, viaRunnerDurable, inProcess, floor] = results;
console.log(`\nTasks: ${LATENCY_RUNS} one at a time (latency), then ${TASKS} with ${CLIENTS} clients (throughput); ${SLOTS} slots each`);
console.log('system                 p50 ms   p95 ms   tasks/s');
for (const r of results)
  console.log(
    `${r.label.padEnd(21)} ${r.p50.toFixed(1).padStart(7)}  ${r.p95.toFixed(1).padStart(7)}  ${r.throughput.toFixed(0).padStart(8)}`,
  );
const ternTasks = 20 + LATENCY_RUNS + TASKS;
printServiceCpu(`CPU in the Tern phase (${ternTasks} tasks), per service with its child processes`, 'task', [
  { count: ternTasks, cpu: ternCpu },
]);
console.log(
  `\ntern vs bullmq+runner:     latency ×${(t.p50 / viaRunner.p50).toFixed(2)} (p50), throughput ×${(t.throughput / viaRunner.throughput).toFixed(2)}`,
);
console.log(
  `tern vs bullmq+runner aof: latency ×${(t.p50 / viaRunnerDurable.p50).toFixed(2)} (p50), throughput ×${(t.throughput / viaRunnerDurable.throughput).toFixed(2)}`,
);
console.log(
  `tern vs bullmq:            latency ×${(t.p50 / inProcess.p50).toFixed(2)} (p50), throughput ×${(t.throughput / inProcess.throughput).toFixed(2)}`,
);
// The design's share and Tern's own: the parts alone against BullMQ, Tern against the parts alone.
console.log(
  `floor vs bullmq+runner aof: latency ×${(floor.p50 / viaRunnerDurable.p50).toFixed(2)} (p50), throughput ×${(floor.throughput / viaRunnerDurable.throughput).toFixed(2)}`,
);
console.log(
  `tern vs floor:             latency ×${(t.p50 / floor.p50).toFixed(2)} (p50), throughput ×${(t.throughput / floor.throughput).toFixed(2)}`,
);
