import { once } from 'node:events';
import { createServer } from 'node:net';

/**
 * A free TCP port on loopback, for a host-networked container's $PORT. The OS picks it; the
 * caller remembers what it handed out recently so two containers starting at once differ.
 */
export async function freePort(avoid: ReadonlySet<number> = new Set()): Promise<number> {
  for (let attempt = 0; attempt < 20; attempt++) {
    const server = createServer();
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const port = (server.address() as { port: number }).port;
    server.close();
    await once(server, 'close');
    if (!avoid.has(port)) return port;
  }
  throw new Error('no free port found');
}
