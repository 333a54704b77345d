import { createSocket, type Socket } from 'node:dgram';
import { once } from 'node:events';
import { createServer, type Server } from 'node:net';
import { freePort } from '#tern/runtime';

/** A DNS query for the A record of `name`, recursion desired. */
export function aQuery(name: string, id = 0x1234): Buffer {
  const header = Buffer.alloc(12);
  header.writeUInt16BE(id, 0);
  header.writeUInt16BE(0x0100, 2);
  header.writeUInt16BE(1, 4);
  const labels = name.split('.').map((l) => Buffer.concat([Buffer.from([l.length]), Buffer.from(l, 'ascii')]));
  return Buffer.concat([header, ...labels, Buffer.from([0, 0, 1, 0, 1])]);
}

/**
 * A resolver for tests on 127.0.0.1 (UDP and TCP on one random port): it answers an A query for
 * a name in `records` with its address, and any other with NXDOMAIN. Enough DNS for glibc's
 * resolver and a hand-made query; `queries` lists the names asked, with the transport.
 */
/**
 * A UDP and a TCP socket on one port, drawn outside the kernel's ephemeral range (freePort): a
 * port the kernel picks for UDP may be taken for TCP by any outgoing connection on the machine.
 */
async function bindBoth(): Promise<{ udp: Socket; tcp: Server; port: number }> {
  for (let attempt = 1; ; attempt++) {
    const port = await freePort();
    const udp = createSocket('udp4');
    const tcp = createServer();
    try {
      udp.bind(port, '127.0.0.1');
      await once(udp, 'listening');
      tcp.listen(port, '127.0.0.1');
      await once(tcp, 'listening');
      return { udp, tcp, port };
    } catch (e) {
      // Whichever socket did bind is let go; closing the other throws, as it never ran.
      for (const close of [() => udp.close(), () => tcp.close()])
        try {
          close();
        } catch {
          // not bound
        }
      if (attempt >= 5) throw e;
    }
  }
}

export class TestDnsServer {
  readonly queries: { name: string; over: 'udp' | 'tcp' }[] = [];

  private constructor(
    private readonly udp: Socket,
    private readonly tcp: Server,
    readonly port: number,
  ) {}

  static async start(records: Record<string, string>): Promise<TestDnsServer> {
    const { udp, tcp, port } = await bindBoth();
    const server = new TestDnsServer(udp, tcp, port);
    udp.on('message', (query, from) => {
      const reply = server.reply(query, records, 'udp');
      if (reply) udp.send(reply, from.port, from.address);
    });
    tcp.on('connection', (socket) => {
      let buffered = Buffer.alloc(0);
      socket.on('error', () => undefined);
      socket.on('data', (chunk) => {
        buffered = Buffer.concat([buffered, chunk]);
        while (buffered.length >= 2 && buffered.length >= 2 + buffered.readUInt16BE(0)) {
          const query = buffered.subarray(2, 2 + buffered.readUInt16BE(0));
          buffered = buffered.subarray(2 + query.length);
          const reply = server.reply(query, records, 'tcp');
          if (reply) socket.write(Buffer.concat([Buffer.from([reply.length >> 8, reply.length & 0xff]), reply]));
        }
      });
    });
    return server;
  }

  get upstream(): { address: string; port: number } {
    return { address: '127.0.0.1', port: this.port };
  }

  async stop(): Promise<void> {
    this.udp.close();
    await new Promise((r) => this.tcp.close(r));
  }

  /** The answer to one query: its header and question, then one A record when the name is known. */
  private reply(query: Buffer, records: Record<string, string>, over: 'udp' | 'tcp'): Buffer | undefined {
    if (query.length < 12 || query.readUInt16BE(4) !== 1) return undefined;
    const labels: string[] = [];
    let at = 12;
    while (at < query.length && query[at] !== 0) {
      labels.push(query.subarray(at + 1, at + 1 + query[at]).toString('ascii'));
      at += 1 + query[at];
    }
    const questionEnd = at + 5; // the root label, QTYPE, QCLASS
    if (questionEnd > query.length) return undefined;
    const name = labels.join('.').toLowerCase();
    this.queries.push({ name, over });
    const type = query.readUInt16BE(at + 1);
    const address = records[name];
    const answers = address && type === 1 ? 1 : 0;
    const header = Buffer.alloc(12);
    query.copy(header, 0, 0, 2);
    // QR, RA, the query's RD; NXDOMAIN when the name is unknown.
    header.writeUInt16BE(0x8080 | (query.readUInt16BE(2) & 0x0100) | (address ? 0 : 3), 2);
    header.writeUInt16BE(1, 4);
    header.writeUInt16BE(answers, 6);
    const parts = [header, query.subarray(12, questionEnd)];
    if (answers) {
      const record = Buffer.alloc(16);
      record.writeUInt16BE(0xc00c, 0); // the name: a pointer to the question's
      record.writeUInt16BE(1, 2); // A
      record.writeUInt16BE(1, 4); // IN
      record.writeUInt32BE(60, 6); // TTL
      record.writeUInt16BE(4, 10);
      address.split('.').forEach((octet, i) => record.writeUInt8(Number(octet), 12 + i));
      parts.push(record);
    }
    return Buffer.concat(parts);
  }
}
