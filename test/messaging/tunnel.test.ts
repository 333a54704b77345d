import 'reflect-metadata';
import { once } from 'node:events';
import { type AddressInfo, connect, createServer, type Server, type Socket } from 'node:net';
import { Logger } from '@nestjs/common';
import type { NatsConnection } from '@nats-io/transport-node';
import { SANDBOX_TUNNEL_IN } from '#tern/contracts';
import { connectNats, Messaging, Namespace, TunnelEnd } from '#tern/messaging';
import { TEST_NATS, uniqueName } from '../support/isolation.js';
import { waitFor } from '../support/processes.js';

const quiet = new Logger('test');
quiet.log = quiet.warn = quiet.error = () => undefined;

/**
 * A connected pair of TCP sockets on the loopback: [the side a test drives, the side a tunnel end
 * carries]. Half-open allowed, as the gateway's HTTP sockets are: a side that ended may still hear.
 */
async function socketPair(): Promise<[Socket, Socket, Server]> {
  const server = createServer({ allowHalfOpen: true });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const accepted = once(server, 'connection') as Promise<[Socket]>;
  const client = connect({ port: (server.address() as AddressInfo).port, host: '127.0.0.1', allowHalfOpen: true });
  const [inner] = await accepted;
  await once(client, 'connect').catch(() => undefined);
  return [client, inner, server];
}

/** Everything a socket reads until its peer ends it (the socket stays open for writing: no async iterator, which destroys it). */
function readAll(socket: Socket): Promise<Buffer> {
  const chunks: Buffer[] = [];
  socket.on('data', (chunk: Buffer) => chunks.push(chunk));
  return new Promise((resolve) => socket.once('end', () => resolve(Buffer.concat(chunks))));
}

describe('sandbox tunnels over NATS (TunnelEnd)', () => {
  let gatewayNc: NatsConnection;
  let agentNc: NatsConnection;
  let gateway: Messaging;
  let agent: Messaging;
  const servers: Server[] = [];

  beforeAll(async () => {
    const namespace = uniqueName('tunnel');
    gatewayNc = await connectNats({ ...TEST_NATS, name: 'tunnel-gateway' }, quiet);
    agentNc = await connectNats({ ...TEST_NATS, name: 'tunnel-agent' }, quiet);
    gateway = new Messaging(gatewayNc, new Namespace(namespace));
    agent = new Messaging(agentNc, new Namespace(namespace));
  });
  afterAll(async () => {
    for (const s of servers) s.close();
    await Promise.all([gatewayNc.close(), agentNc.close()]);
  });

  /** A caller's socket and a sandbox's socket joined by a tunnel, each end on its own connection. */
  async function tunnel(tunnelId: string) {
    const [caller, callerInner, s1] = await socketPair();
    const [sandbox, sandboxInner, s2] = await socketPair();
    servers.push(s1, s2);
    const gatewayEnd = new TunnelEnd(gateway, 'gateway', 'm-1', tunnelId);
    const agentEnd = new TunnelEnd(agent, 'agent', 'm-1', tunnelId);
    await Promise.all([gatewayNc.flush(), agentNc.flush()]);
    return { caller, sandbox, gatewayEnd, agentEnd, gatewayDone: gatewayEnd.attach(callerInner), agentDone: agentEnd.attach(sandboxInner) };
  }

  it('carries bytes both ways in order, in messages of at most 64 KiB, and lets the sandbox answer after the caller ended', async () => {
    const t = await tunnel('t1');
    // Listening in on the gateway → agent subject, as a second subscriber.
    const sizes: number[] = [];
    const spy = gatewayNc.subscribe(gateway.subject(SANDBOX_TUNNEL_IN, ['m-1', 't1']), {
      callback: (_e, m) => void sizes.push(m.data.length),
    });
    await gatewayNc.flush();
    const big = Buffer.from(new Uint8Array(300 * 1024).map((_, i) => (i * 7) % 256));
    const atSandbox = readAll(t.sandbox);
    t.caller.write('hello ');
    t.caller.end(big);
    expect((await atSandbox).equals(Buffer.concat([Buffer.from('hello '), big]))).toBe(true);
    // The spy's copies come back on the gateway's connection, the agent's on its own: on a loaded
    // machine some of the spy's land after the agent has read everything.
    const total = () => sizes.reduce((a, b) => a + b, 0);
    await waitFor('the spy to see every byte', async () => total() >= 6 + big.length, 5_000, 20).catch(() => undefined);
    expect(total()).toBe(6 + big.length);
    expect(Math.max(...sizes)).toBeLessThanOrEqual(64 * 1024);
    spy.unsubscribe();

    // The caller's end reached the sandbox, yet what the sandbox says last still comes back.
    const atCaller = readAll(t.caller);
    t.sandbox.end('last words');
    expect((await atCaller).toString()).toBe('last words');
    await Promise.all([t.gatewayDone, t.agentDone]);
  }, 30_000);

  it('closes the other side when one end closes (a shell that exited, a gateway that gave up)', async () => {
    const t = await tunnel('t2');
    const atCaller = readAll(t.caller);
    t.sandbox.write('partial');
    // The sandbox's side goes away abruptly: the caller gets what was sent, then its end.
    await new Promise((resolve) => setTimeout(resolve, 200));
    t.agentEnd.close();
    expect((await atCaller).toString()).toBe('partial');
    await t.gatewayDone;
  }, 30_000);

  it('keeps bytes that arrive before a socket is attached (the agent answers the open and sends at once)', async () => {
    const [caller, callerInner, s1] = await socketPair();
    const [sandbox, sandboxInner, s2] = await socketPair();
    servers.push(s1, s2);
    const gatewayEnd = new TunnelEnd(gateway, 'gateway', 'm-1', 't3');
    const agentEnd = new TunnelEnd(agent, 'agent', 'm-1', 't3');
    await gatewayNc.flush();
    const agentDone = agentEnd.attach(sandboxInner);
    sandbox.end('banner before the caller is attached');
    await agentNc.flush();
    await new Promise((resolve) => setTimeout(resolve, 200));
    const atCaller = readAll(caller);
    const gatewayDone = gatewayEnd.attach(callerInner);
    expect((await atCaller).toString()).toBe('banner before the caller is attached');
    caller.end();
    await Promise.all([gatewayDone, agentDone]);
  }, 30_000);
});
