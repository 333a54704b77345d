import { createServer as createHttpServer, type Server } from 'node:http';
import { createServer as createTcpServer, type AddressInfo } from 'node:net';
import { waitForHealth } from './health.js';

/** Listens on a free loopback port; returns the port and a closer. */
async function listen(server: Server | ReturnType<typeof createTcpServer>): Promise<{ port: number; close: () => Promise<void> }> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { port: (server.address() as AddressInfo).port, close: () => new Promise((r) => server.close(() => r())) };
}

describe('waitForHealth', () => {
  it('probes the given path until it answers 2xx, backing off from 50 ms instead of hammering the server', async () => {
    let probes = 0;
    const started = Date.now();
    const server = createHttpServer((req, res) => {
      probes++;
      res.statusCode = req.url === '/ready' && Date.now() - started > 1500 ? 200 : 503;
      res.end();
    });
    const { port, close } = await listen(server);
    try {
      await waitForHealth({ port, check: '/ready', timeoutMs: 5000 });
      // 50, 75, 113, 169, 253, 380, 570 ms … : about 8 probes in 1.5 s, where 10 ms apart made 150.
      expect(probes).toBeGreaterThanOrEqual(3);
      expect(probes).toBeLessThanOrEqual(10);
    } finally {
      await close();
    }
  });

  it("names the last probe's outcome when it gives up: the status answered, or the connection refused", async () => {
    const server = createHttpServer((_req, res) => {
      res.statusCode = 404;
      res.end();
    });
    const { port, close } = await listen(server);
    try {
      await expect(waitForHealth({ port, timeoutMs: 300 })).rejects.toThrow(
        /GET \/health on 127\.0\.0\.1:\d+ did not pass within 300 ms \(last: answered 404\)/,
      );
    } finally {
      await close();
    }
    await expect(waitForHealth({ port, timeoutMs: 200 })).rejects.toThrow(/last: connection refused/);
  });

  it('with tcp, passes as soon as the port accepts a connection, whatever the protocol', async () => {
    const server = createTcpServer((socket) => {
      // The probe hangs up at once.
      socket.on('error', () => undefined);
      socket.end('not http\n');
    });
    const { port, close } = await listen(server);
    try {
      await expect(waitForHealth({ port, check: 'tcp', timeoutMs: 2000 })).resolves.toBeLessThan(2000);
    } finally {
      await close();
    }
    await expect(waitForHealth({ port, check: 'tcp', timeoutMs: 200 })).rejects.toThrow(
      /TCP connection on 127\.0\.0\.1:\d+ .*connection refused/,
    );
  });

  it('stops when gaveUp says so (the container exited), naming why', async () => {
    const server = createHttpServer((_req, res) => {
      res.statusCode = 500;
      res.end();
    });
    const { port, close } = await listen(server);
    try {
      await expect(waitForHealth({ port, timeoutMs: 10_000, gaveUp: async () => true })).rejects.toThrow(/gave up .*last: answered 500/);
    } finally {
      await close();
    }
  });
});
