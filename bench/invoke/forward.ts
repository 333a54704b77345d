/**
 * The agent's hop to a container alone: CPU per request of forwardToContainer (undici pool,
 * dispatch handler) against a plain node:http keep-alive client reading the same response (the
 * agent's way before), both calling one local HTTP server in a child process (its CPU not
 * counted). Rounds alternate between the two so load drifting on a shared machine hits both.
 *
 *   node dist/bench/invoke/forward.js [--requests 5000] [--concurrency 16] [--rounds 3]
 */
import { spawn } from 'node:child_process';
import { setMaxListeners } from 'node:events';
import { Agent, request } from 'node:http';
import { benchArgs } from '../args.js';
import type { InvokeHead } from '#tern/contracts';
import { forwardToContainer } from '../../apps/agent/src/invoke/forward.js';

const values = benchArgs(`Usage: node dist/bench/invoke/forward.js [--requests 5000] [--concurrency 16] [--rounds 3]`, {
  requests: { type: 'string', default: '5000' },
  concurrency: { type: 'string', default: '16' },
  rounds: { type: 'string', default: '3' },
});
const REQUESTS = Number(values.requests);
const ROUNDS = Number(values.rounds);

// The runner's answer to the e2e bench's request, as one write with its length.
const SERVER = `
const s = require('node:http').createServer((req, res) => {
  req.resume();
  req.on('end', () => { const b = Buffer.from('{"hello": "Ada"}'); res.writeHead(200, { 'content-type': 'application/json', 'content-length': b.length }); res.end(b); });
});
s.keepAliveTimeout = 75000;
s.listen(0, '127.0.0.1', () => console.log(s.address().port));`;
const server = spawn(process.execPath, ['-e', SERVER], { stdio: ['ignore', 'pipe', 'inherit'] });
const port = await new Promise<number>((resolve) => server.stdout.once('data', (d: Buffer) => resolve(Number(d.toString()))));

const BODY = Buffer.from(JSON.stringify({ name: 'Ada' }));
const HEAD: InvokeHead = {
  requestId: 'r',
  deploymentId: 'd',
  method: 'POST',
  path: '/',
  headers: { 'content-type': 'application/json', 'x-tern-request-id': 'r', 'user-agent': 'bench' },
  timeoutMs: 5000,
  bodyBytes: BODY.length,
};

async function viaForward(signal: AbortSignal): Promise<void> {
  const r = await forwardToContainer({ host: '127.0.0.1', port }, HEAD, BODY, signal);
  if (!(r.body instanceof Uint8Array)) for await (const chunk of r.body) void chunk;
}

const nodeAgent = new Agent({ keepAlive: true });
function viaNodeHttp(): Promise<void> {
  return new Promise((resolve, reject) => {
    const req = request({
      host: '127.0.0.1',
      port,
      method: 'POST',
      path: '/',
      headers: { ...HEAD.headers, 'content-length': String(BODY.length) },
      agent: nodeAgent,
    });
    req.on('error', reject);
    req.on('response', (res) => {
      const parts: Buffer[] = [];
      res.on('data', (c: Buffer) => parts.push(c));
      res.on('end', () => resolve(void Buffer.concat(parts)));
    });
    req.end(BODY);
  });
}

/** CPU µs of this process per request, `concurrency` callers sharing `count` requests. */
async function cpuPerRequest(call: () => Promise<void>, count: number, concurrency: number): Promise<number> {
  let left = count;
  const before = process.cpuUsage();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (left-- > 0) await call();
    }),
  );
  const used = process.cpuUsage(before);
  return (used.user + used.system) / count;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

try {
  console.log(`the agent's hop to a container, ${REQUESTS} requests a round, ${ROUNDS} rounds each, median CPU µs per request`);
  for (const concurrency of [1, Number(values.concurrency)]) {
    // One signal per caller, as the agent has one per request being answered.
    const signals = new AbortController();
    setMaxListeners(concurrency + 1, signals.signal);
    const undici: number[] = [];
    const node: number[] = [];
    await cpuPerRequest(() => viaForward(signals.signal), 500, concurrency);
    await cpuPerRequest(viaNodeHttp, 500, concurrency);
    for (let round = 0; round < ROUNDS; round++) {
      undici.push(await cpuPerRequest(() => viaForward(signals.signal), REQUESTS, concurrency));
      node.push(await cpuPerRequest(viaNodeHttp, REQUESTS, concurrency));
    }
    const [u, n] = [median(undici), median(node)];
    console.log(
      `concurrency ${String(concurrency).padStart(2)}: forwardToContainer ${u.toFixed(0)} µs, node:http ${n.toFixed(0)} µs, ratio ×${(u / n).toFixed(2)}`,
    );
  }
} finally {
  server.kill();
  nodeAgent.destroy();
}
process.exit(0);
