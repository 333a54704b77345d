/**
 * Invoke protocol overhead, without the rest of the stack: one local HTTP echo server (the
 * "container"), called straight (the floor) and through invoke() → NATS → serveInvoke() → HTTP
 * (what the gateway and the agent add, minus routing). Needs NATS (NATS_URL, default local).
 *
 *   node dist/bench/invoke/protocol.js [--requests 2000] [--concurrency 32] [--bytes 1024]
 *
 * The full bench (gateway vs container port vs nginx, through a deployed example) needs the
 * agent's forwarding; see bench/invoke/README.md.
 */
import 'reflect-metadata';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { benchArgs } from '../args.js';
import { Logger } from '@nestjs/common';
import { connectNats, invoke, Messaging, Namespace, serveInvoke } from '#tern/messaging';

const values = benchArgs(`Usage: node dist/bench/invoke/protocol.js [--requests 2000] [--concurrency 32] [--bytes 1024]`, {
  requests: { type: 'string', default: '2000' },
  concurrency: { type: 'string', default: '32' },
  bytes: { type: 'string', default: '1024' },
});
const REQUESTS = Number(values.requests);
const CONCURRENCY = Number(values.concurrency);
const BODY = Buffer.alloc(Number(values.bytes), 0x61);

const server = createServer((req, res) => {
  const parts: Buffer[] = [];
  req.on('data', (c: Buffer) => parts.push(c));
  req.on('end', () => res.writeHead(200, { 'content-type': 'application/octet-stream' }).end(Buffer.concat(parts)));
});
await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;

const quiet = new Logger('bench');
quiet.log = () => undefined;
const nc = await connectNats({ servers: [process.env.NATS_URL ?? 'nats://127.0.0.1:4222'], name: 'bench-invoke' }, quiet);
const messaging = new Messaging(nc, new Namespace(`bench${process.pid}`));
const target = { machineId: 'bench-machine', containerId: 'bench-container' };
const sub = serveInvoke(messaging, target, async (head, body) => {
  const res = await fetch(`${url.slice(0, -1)}${head.path}`, { method: head.method, body, headers: head.headers });
  return {
    status: res.status,
    headers: { 'content-type': res.headers.get('content-type') ?? '' },
    body: new Uint8Array(await res.arrayBuffer()),
  };
});

async function direct(): Promise<void> {
  const res = await fetch(url, { method: 'POST', body: BODY });
  await res.arrayBuffer();
}

let n = 0;
async function viaNats(): Promise<void> {
  const res = await invoke(
    messaging,
    target,
    { requestId: `r${n++}`, deploymentId: 'bench', method: 'POST', path: '/', headers: {}, timeoutMs: 10_000 },
    BODY,
  );
  for await (const _ of res.body);
}

async function run(label: string, once: () => Promise<void>, concurrency: number) {
  for (let i = 0; i < 200; i++) await once(); // warm-up
  const times: number[] = [];
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next++ < REQUESTS) {
        const t = performance.now();
        await once();
        times.push(performance.now() - t);
      }
    }),
  );
  const wall = (performance.now() - started) / 1000;
  times.sort((a, b) => a - b);
  const pct = (p: number) => times[Math.min(times.length - 1, Math.floor((p / 100) * times.length))];
  return { label, concurrency, p50: pct(50), p99: pct(99), rps: times.length / wall };
}

const rows = [];
for (const c of [1, CONCURRENCY]) {
  const floor = await run('direct HTTP', direct, c);
  const nats = await run('invoke over NATS + HTTP', viaNats, c);
  rows.push(floor, nats, {
    label: `ratio (c=${c})`,
    concurrency: c,
    p50: nats.p50 / floor.p50,
    p99: nats.p99 / floor.p99,
    rps: nats.rps / floor.rps,
  });
}
console.log(`invoke protocol, ${REQUESTS} requests, ${BODY.length}-byte bodies`);
console.log(['path'.padEnd(26), 'conc'.padStart(5), 'p50 ms'.padStart(9), 'p99 ms'.padStart(9), 'req/s'.padStart(9)].join(' '));
for (const r of rows) {
  const ratio = r.label.startsWith('ratio');
  const f = (v: number) => (ratio ? `×${v.toFixed(2)}` : v.toFixed(2));
  console.log(
    [
      r.label.padEnd(26),
      String(r.concurrency).padStart(5),
      f(r.p50).padStart(9),
      f(r.p99).padStart(9),
      (ratio ? `×${r.rps.toFixed(2)}` : r.rps.toFixed(0)).padStart(9),
    ].join(' '),
  );
}
sub.unsubscribe();
await nc.close();
server.close();
