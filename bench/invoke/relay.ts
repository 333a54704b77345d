/**
 * The floor of Tern's invoke topology, for `e2e.ts`: the same hops as the gateway's path with
 * none of Tern's work on them. Two Node processes, as the gateway and the agent are:
 *   front  an HTTP server; each request is one core-NATS request (body as the payload, nothing
 *          else) and the reply's bytes are the answer
 *   back   subscribed to that subject; each message is one POST to the container through an
 *          undici pool (kept-alive connections, as the agent's), the body of its answer the reply
 * No auth, routing table, lanes, headers carried, keepalives, timeouts, ordering or metrics: what
 * is left is what any design that puts a message bus and an outbound-only agent between the
 * client and the container pays on this machine (two more processes woken, four more socket
 * ends, two NATS deliveries). The gateway's row divided by this one is Tern's own cost; this
 * row divided by nginx's is the design's.
 *
 *   node dist/bench/invoke/relay.js front <nats-url> <subject> <port>
 *   node dist/bench/invoke/relay.js back <nats-url> <subject> <container-url>
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { createServer } from 'node:http';
import { fileURLToPath } from 'node:url';
import { randomBytes } from 'node:crypto';
import { connect } from '@nats-io/transport-node';
import { Pool } from 'undici';

export interface Relay {
  url: string;
  /** The front's and the back's pids, in that order. */
  pids: number[];
  stop(): Promise<void>;
}

/** Starts the front and the back as child processes; resolves when a request goes through. */
export async function startRelay(natsUrl: string, containerUrl: string, port: number): Promise<Relay> {
  const subject = `bench.relay.${randomBytes(6).toString('hex')}`;
  const self = fileURLToPath(import.meta.url);
  const children: ChildProcess[] = [
    spawn(process.execPath, [self, 'back', natsUrl, subject, containerUrl], { stdio: ['ignore', 'ignore', 'inherit'] }),
    spawn(process.execPath, [self, 'front', natsUrl, subject, String(port)], { stdio: ['ignore', 'ignore', 'inherit'] }),
  ];
  const stop = async () => {
    for (const c of children) c.kill('SIGKILL');
    await Promise.all(children.map((c) => (c.exitCode === null ? new Promise((r) => c.once('exit', r)) : undefined)));
  };
  const url = `http://127.0.0.1:${port}/`;
  // Imported here, not at the top: the front and the back run this file too, and should load no
  // more than they use (a floor measured on lean processes).
  const { until } = await import('./stack.js');
  try {
    await until('the relay', 10_000, async () => ((await fetch(url, { method: 'POST', body: '{}' })).ok ? true : undefined), 50);
  } catch (e) {
    await stop();
    throw e;
  }
  return { url, pids: [children[1]!.pid!, children[0]!.pid!], stop };
}

async function front(natsUrl: string, subject: string, port: number): Promise<void> {
  const nc = await connect({ servers: natsUrl, name: 'tern-bench-relay-front' });
  createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      nc.request(subject, Buffer.concat(chunks), { timeout: 5_000 }).then(
        (m) => {
          res.writeHead(200, { 'content-type': 'application/json', 'content-length': m.data.length });
          res.end(m.data);
        },
        () => {
          res.writeHead(502);
          res.end();
        },
      );
    });
  }).listen(port, '127.0.0.1');
}

async function back(natsUrl: string, subject: string, containerUrl: string): Promise<void> {
  const nc = await connect({ servers: natsUrl, name: 'tern-bench-relay-back' });
  const pool = new Pool(containerUrl, { connections: 64 });
  nc.subscribe(subject, {
    callback: (_err, msg) => {
      pool
        .request({ method: 'POST', path: '/', body: msg.data, headers: { 'content-type': 'application/json' } })
        .then((r) => r.body.arrayBuffer())
        .then(
          (b) => msg.respond(new Uint8Array(b)),
          () => msg.respond(new Uint8Array()),
        );
    },
  });
}

const [role, natsUrl, subject, arg] = process.argv.slice(2);
if (process.argv[1] === fileURLToPath(import.meta.url)) {
  if (role === 'front') await front(natsUrl!, subject!, Number(arg));
  else if (role === 'back') await back(natsUrl!, subject!, arg!);
  else throw new Error('usage: relay.js front|back <nats-url> <subject> <port|container-url>');
}
