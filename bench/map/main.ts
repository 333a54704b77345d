/**
 * Maps end to end: a map of --inputs inputs of a trivial function (the bench handler) at chunk
 * sizes 1, 10 and 100, beside the task queue's own throughput for the same work (the same inputs
 * submitted as tasks by --clients concurrent clients), measured in the same run on the same
 * slots (one container with --slots workers each). Per map: inputs per second from the POST
 * until the last result line is read, the time to accept the inputs (the 202), and the
 * client-observed time to the first result line. --baseline runs the task queue on fewer inputs
 * than the maps (its rate is steady; 100,000 one-at-a-time tasks take long). Prints a table; not a test.
 *
 *   npm run build && node dist/bench/map/main.js [--inputs 100000] [--chunks 1,10,100] [--baseline <inputs>] [--clients 32] [--slots 4]
 *       [--gateway URL --token T]
 *
 * Without --gateway it starts its own stack (as bench/invoke/e2e.ts) and removes it afterwards.
 * Needs root and runc.
 */
import 'reflect-metadata';
import { Agent } from 'node:http';
import { benchArgs } from '../args.js';
import { api, deploy, type DeploymentView, openStack, send, type Stack, until } from '../invoke/stack.js';
import { duringWork, printServiceCpu, type ServiceCpu } from '../invoke/service-cpu.js';

const values = benchArgs(
  `Usage: node dist/bench/map/main.js [--inputs 100000] [--chunks 1,10,100] [--baseline <inputs>] [--clients 32] [--slots 4]
    [--gateway URL --token T]`,
  {
    inputs: { type: 'string', default: '100000' },
    baseline: { type: 'string' },
    chunks: { type: 'string', default: '1,10,100' },
    clients: { type: 'string', default: '32' },
    slots: { type: 'string', default: '4' },
    gateway: { type: 'string' },
    token: { type: 'string' },
  },
);
const INPUTS = Number(values.inputs);
const BASELINE = Number(values.baseline ?? values.inputs);
const CHUNKS = values.chunks!.split(',').map(Number);
const CLIENTS = Number(values.clients);
const SLOTS = Number(values.slots);
const ONE_CONTAINER = `workers: ${SLOTS}\ncpu: 1\nmemory: 256Mi\nautoscaler:\n  type: queue_depth\n  min_containers: 1\n  max_containers: 1\n`;

interface Row {
  label: string;
  /** Inputs (or tasks) the run handled, for CPU per input. */
  count: number;
  /** CPU per service during the run (own stack only). */
  cpu?: ServiceCpu;
  seconds: number;
  perSecond: number;
  acceptSeconds?: number;
  firstResultMs?: number;
}

async function warm(stack: Stack, name: string, kind: 'function' | 'task_queue') {
  await deploy(stack, name, ONE_CONTAINER, kind);
  await until(
    `a warm container of ${name}`,
    120_000,
    async () => ((await api<DeploymentView>(stack, 'GET', `/api/v1/deployments/${name}`)).actual >= 1 ? true : undefined),
    250,
  );
}

/** One map: POST the inputs as NDJSON, then read /results to the last line. */
async function map(stack: Stack, chunkSize: number): Promise<Row> {
  const headers = { authorization: `Bearer ${stack.token}` };
  const body = Array.from({ length: INPUTS }, (_, i) => `{"name":"m-${i}"}`).join('\n');
  const t0 = performance.now();
  const res = await fetch(`${stack.gateway}/function/bench-map/map?chunk_size=${chunkSize}`, {
    method: 'POST',
    headers: { ...headers, 'content-type': 'application/x-ndjson' },
    body,
  });
  if (res.status !== 202) throw new Error(`map: ${res.status} ${await res.text()}`);
  const { map_id: id } = (await res.json()) as { map_id: string };
  const accepted = performance.now();
  let first: number | undefined;
  let lines = 0;
  let partial = '';
  const results = await fetch(`${stack.gateway}/api/v1/maps/${id}/results`, { headers });
  for await (const bytes of results.body as unknown as AsyncIterable<Uint8Array>) {
    first ??= performance.now();
    const parts = (partial + Buffer.from(bytes).toString('utf8')).split('\n');
    partial = parts.pop()!;
    for (const line of parts) {
      if (!line) continue;
      const l = JSON.parse(line) as { index: number; status: string };
      if (l.index !== lines || l.status !== 'ok') throw new Error(`map line ${lines}: ${line}`);
      lines++;
    }
  }
  if (lines !== INPUTS) throw new Error(`map ${id}: ${lines} of ${INPUTS} lines`);
  const seconds = (performance.now() - t0) / 1000;
  const row = {
    label: `map chunk_size ${chunkSize}`,
    count: INPUTS,
    seconds,
    perSecond: INPUTS / seconds,
    acceptSeconds: (accepted - t0) / 1000,
    firstResultMs: first! - t0,
  };
  console.error(`${row.label}: ${row.perSecond.toFixed(0)} inputs/s, first result after ${row.firstResultMs.toFixed(0)} ms`);
  return row;
}

/** The same work as tasks on a task queue: --clients clients, each submitting and waiting for one task at a time. */
async function taskQueue(stack: Stack): Promise<Row> {
  const agent = new Agent({ keepAlive: true, maxSockets: CLIENTS * 2 });
  const headers = { authorization: `Bearer ${stack.token}` };
  const call = async (method: string, url: string, body?: string) => {
    const r = await send(agent, method, { url, headers }, body === undefined ? undefined : Buffer.from(body), 60_000);
    if (r.status < 200 || r.status >= 300) throw new Error(`${method} ${url}: ${r.status} ${r.body}`);
    return JSON.parse(r.body) as { task_id: string; done: boolean; status: string };
  };
  let next = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: CLIENTS }, async () => {
      while (next < BASELINE) {
        const { task_id } = await call('POST', `${stack.gateway}/taskqueue/bench-map-tq`, JSON.stringify({ name: `t-${next++}` }));
        for (;;) {
          const t = await call('GET', `${stack.gateway}/api/v1/tasks/${task_id}/wait?timeout=30`);
          if (!t.done) continue;
          if (t.status !== 'COMPLETE') throw new Error(`task ${task_id} ended ${t.status}`);
          break;
        }
      }
    }),
  );
  agent.destroy();
  const seconds = (performance.now() - t0) / 1000;
  console.error(`task queue: ${(BASELINE / seconds).toFixed(0)} tasks/s`);
  return { label: `task queue (${BASELINE}, ${CLIENTS} clients)`, count: BASELINE, seconds, perSecond: BASELINE / seconds };
}

const stack = await openStack({ gateway: values.gateway, token: values.token });
const rows: Row[] = [];
try {
  const measured = async (work: () => Promise<Row>) => {
    const { value, cpu } = await duringWork(stack, !values.gateway, work);
    rows.push({ ...value, cpu });
  };
  await warm(stack, 'bench-map-tq', 'task_queue');
  await measured(() => taskQueue(stack));
  await warm(stack, 'bench-map', 'function');
  for (const chunkSize of CHUNKS) await measured(() => map(stack, chunkSize));
} finally {
  await stack.stop();
}

console.log(`\nMap of ${INPUTS} inputs of a trivial function; one container, ${SLOTS} workers`);
console.log('run                                seconds   inputs/s   accepted s   first result ms');
for (const r of rows)
  console.log(
    `${r.label.padEnd(33)} ${r.seconds.toFixed(1).padStart(8)}  ${r.perSecond.toFixed(0).padStart(9)}  ${(r.acceptSeconds?.toFixed(2) ?? '-').padStart(11)}  ${(r.firstResultMs?.toFixed(0) ?? '-').padStart(16)}`,
  );
printServiceCpu(
  'CPU per service with its child processes, per input (a task for the task queue)',
  'input',
  rows.map((r) => ({ label: r.label.replace(/ \(.*/, '').replace('map chunk_size', 'chunk_size'), count: r.count, cpu: r.cpu ?? {} })),
);
const baseline = rows[0];
for (const r of rows.slice(1)) console.log(`${r.label} vs task queue: ×${(r.perSecond / baseline.perSecond).toFixed(2)} throughput`);
