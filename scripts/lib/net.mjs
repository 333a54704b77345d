import { connect, createServer } from 'node:net';

/** True when nothing listens on host:port (tries to bind it). */
export function isPortFree(port, host = '0.0.0.0') {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.unref();
    srv.once('error', () => resolve(false));
    srv.listen({ port, host, exclusive: true }, () => srv.close(() => resolve(true)));
  });
}

/** A port the kernel says is free now, not in `avoid`. */
export async function freePort(avoid = new Set(), host = '127.0.0.1') {
  for (let i = 0; i < 50; i++) {
    const port = await new Promise((resolve, reject) => {
      const srv = createServer();
      srv.unref();
      srv.once('error', reject);
      srv.listen({ port: 0, host, exclusive: true }, () => {
        const p = srv.address().port;
        srv.close(() => resolve(p));
      });
    });
    if (!avoid.has(port) && (await isPortFree(port))) return port;
  }
  throw new Error('could not find a free TCP port');
}

/** `preferred` when it is free (and not claimed), else a free one. */
export async function pickPort(preferred, claimed) {
  const p = Number(preferred);
  const port = p > 0 && !claimed.has(p) && (await isPortFree(p)) ? p : await freePort(claimed);
  claimed.add(port);
  return port;
}

/** Connects to host:port and resolves the first chunk the server sends ('' when it sends nothing), or undefined. */
export function probe(host, port, timeoutMs = 1500) {
  return new Promise((resolve) => {
    const sock = connect({ host, port });
    let done = false;
    const finish = (v) => {
      if (done) return;
      done = true;
      sock.destroy();
      resolve(v);
    };
    sock.setTimeout(timeoutMs, () => finish(undefined));
    sock.once('error', () => finish(undefined));
    sock.once('data', (d) => finish(String(d)));
    sock.once('connect', () => setTimeout(() => finish(''), Math.min(timeoutMs, 500)));
  });
}

/** Host and port of a URL such as nats://a:4222 or postgres://u@h:5432/db (first of a comma list). */
export function hostPort(url, defaultPort) {
  const first = String(url).split(',')[0].trim();
  const u = new URL(first.includes('://') ? first : `nats://${first}`);
  return { host: u.hostname.replace(/^\[|\]$/g, '') || '127.0.0.1', port: Number(u.port || defaultPort) };
}

/** True when a NATS server answers at url (it greets every client with INFO). */
export async function natsReachable(url) {
  const { host, port } = hostPort(url, 4222);
  const greeting = await probe(host, port);
  return typeof greeting === 'string' && greeting.startsWith('INFO');
}
