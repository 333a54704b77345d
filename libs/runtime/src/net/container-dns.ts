import { createSocket, type RemoteInfo, type Socket } from 'node:dgram';
import { once } from 'node:events';
import { readFile } from 'node:fs/promises';
import { connect, createServer, isIP, type Server, type Socket as TcpSocket } from 'node:net';
import type { RuntimeLogger } from '../types.js';

/** A resolver the forwarder asks: an address and a port (53 unless given). */
export interface DnsUpstream {
  address: string;
  port: number;
}

/** How long one resolver has to answer a query over UDP before the next is asked. */
const UDP_TIMEOUT_MS = 2000;
/** How long a TCP exchange may sit idle. */
const TCP_IDLE_MS = 10_000;
/** Queries in flight at once over UDP; more are dropped. */
const MAX_IN_FLIGHT = 256;

/**
 * `address`, `address:port`, `[v6]:port` or a bare IPv6 address, as a resolver; undefined when
 * it is none of these.
 */
export function parseUpstream(text: string): DnsUpstream | undefined {
  const bracketed = /^\[([^\]]+)\]:(\d+)$/.exec(text);
  const v4WithPort = /^([\d.]+):(\d+)$/.exec(text);
  const [address, port] = bracketed ? [bracketed[1], bracketed[2]] : v4WithPort ? [v4WithPort[1], v4WithPort[2]] : [text, '53'];
  const n = Number(port);
  if (!isIP(address) || !Number.isInteger(n) || n < 1 || n > 65_535) return undefined;
  return { address, port: n };
}

/** The `nameserver` lines of a resolv.conf, as resolvers. */
export function resolversIn(resolvConf: string): DnsUpstream[] {
  return resolvConf
    .split('\n')
    .map((line) => /^\s*nameserver\s+(\S+)/.exec(line)?.[1])
    .flatMap((a) => (a ? [parseUpstream(a)] : []))
    .filter((u): u is DnsUpstream => u !== undefined);
}

/** The host's resolvers, from its /etc/resolv.conf (none when it cannot be read). */
export async function hostResolvers(path = '/etc/resolv.conf'): Promise<DnsUpstream[]> {
  return resolversIn(await readFile(path, 'utf8').catch(() => ''));
}

/**
 * A DNS forwarder on the bridge's own address, port 53, for the containers behind it: each
 * query goes on to the host's resolvers as it came, and the answer back. Containers cannot
 * reach those resolvers themselves when they sit at a private or loopback address (systemd's
 * 127.0.0.53, a cloud's 169.254.169.253 or 10.0.0.2, a home router), which every egress rule
 * keeps out of reach. UDP asks the resolvers in turn; TCP is piped to the first.
 */
export class ContainerDns {
  private udp?: Socket;
  private tcp?: Server;
  private inFlight = 0;

  constructor(
    private readonly address: string,
    private readonly upstreams: readonly DnsUpstream[],
    private readonly log: RuntimeLogger,
  ) {}

  /** Listens on `address`:53 over UDP and TCP; throws when either cannot be bound. */
  async start(): Promise<void> {
    const udp = createSocket('udp4');
    // A reply that cannot be sent (the socket closing) is the client's to ask again.
    udp.on('message', (query, from) => {
      this.answer(query, from).catch(() => undefined);
    });
    udp.on('error', (e) => this.log.warn({ err: e.message }, `container DNS on ${this.address}: ${e.message}`));
    const tcp = createServer((client) => this.pipe(client));
    tcp.on('error', (e) => this.log.warn({ err: e.message }, `container DNS on ${this.address}: ${e.message}`));
    try {
      await new Promise<void>((resolve, reject) => {
        udp.once('error', reject);
        udp.bind({ address: this.address, port: 53, exclusive: true }, () => {
          udp.off('error', reject);
          resolve();
        });
      });
      tcp.listen({ host: this.address, port: 53, exclusive: true });
      await Promise.race([once(tcp, 'listening'), once(tcp, 'error').then(([e]) => Promise.reject(e as Error))]);
    } catch (e) {
      udp.close();
      tcp.close();
      throw e;
    }
    // Neither keeps the process alive: the agent decides when it ends.
    udp.unref();
    tcp.unref();
    this.udp = udp;
    this.tcp = tcp;
  }

  async stop(): Promise<void> {
    this.udp?.close();
    const tcp = this.tcp;
    this.udp = this.tcp = undefined;
    if (tcp) await new Promise((r) => tcp.close(r));
  }

  private async answer(query: Buffer, from: RemoteInfo): Promise<void> {
    // Shorter than a DNS header is no query; past the cap, the client asks again.
    if (query.length < 12 || this.inFlight >= MAX_IN_FLIGHT) return;
    this.inFlight++;
    try {
      for (const upstream of this.upstreams) {
        const reply = await this.ask(upstream, query);
        if (!reply) continue;
        this.udp?.send(reply, from.port, from.address);
        return;
      }
    } finally {
      this.inFlight--;
    }
  }

  /** One resolver's answer to one query, or undefined after UDP_TIMEOUT_MS or an error. */
  private ask(upstream: DnsUpstream, query: Buffer): Promise<Buffer | undefined> {
    return new Promise((resolve) => {
      const socket = createSocket(isIP(upstream.address) === 6 ? 'udp6' : 'udp4');
      let settled = false;
      const done = (reply?: Buffer) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        socket.close();
        resolve(reply);
      };
      const timer = setTimeout(() => done(), UDP_TIMEOUT_MS);
      // Only the answer to this query (its id, the first two bytes) ends the wait.
      socket.on('message', (reply) => {
        if (reply.length >= 2 && reply.readUInt16BE(0) === query.readUInt16BE(0)) done(reply);
      });
      socket.on('error', () => done());
      socket.send(query, upstream.port, upstream.address);
    });
  }

  private pipe(client: TcpSocket): void {
    const upstream = this.upstreams[0];
    if (!upstream) return void client.destroy();
    const server = connect({ host: upstream.address, port: upstream.port });
    for (const s of [client, server]) {
      s.setTimeout(TCP_IDLE_MS, () => s.destroy());
      s.on('error', () => undefined);
      s.on('close', () => {
        client.destroy();
        server.destroy();
      });
    }
    client.pipe(server);
    server.pipe(client);
  }
}
