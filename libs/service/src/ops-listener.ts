import { createServer, type Server } from 'node:http';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import type { TernConfig } from '#tern/config';
import type { Logger as Pino } from 'pino';

/** What the ops listener serves, and the API listener then no longer does. */
const OPS_PATH = /^\/(metrics|health)(\/|\?|$)/;

/**
 * `/metrics` and `/health/*` on their own listener (OPS_HOST:OPS_PORT) when OPS_PORT is set, so
 * a gateway whose API faces the internet keeps them on an address the operator chooses
 * (loopback by default). Both listeners feed the one Fastify router; a hook answers 404 for
 * these paths on any socket but the ops server's. Without OPS_PORT nothing changes: they stay
 * on the HTTP listener, whose HTTP_HOST is then their address. Must run before app.init().
 */
export function prepareOpsListener(app: NestFastifyApplication, config: TernConfig): { listen(log: Pino): Promise<void> } | undefined {
  if (!config.ops.port) return undefined;
  const fastify = app.getHttpAdapter().getInstance();
  const server: Server = createServer((req, res) => fastify.routing(req, res));
  fastify.addHook('onRequest', async (request, reply) => {
    const onOps = (request.raw.socket as { server?: unknown }).server === server;
    if (OPS_PATH.test(request.url) !== onOps) {
      await reply.code(404).send({ statusCode: 404, error: 'Not Found', message: `Cannot ${request.method} ${request.url.split('?')[0]}` });
    }
  });
  fastify.addHook('onClose', () => new Promise<void>((done) => server.close(() => done())));
  return {
    async listen(log: Pino) {
      const { host, port } = config.ops;
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(port, host, () => resolve());
      });
      log.info({ host, port }, `/metrics and /health on http://${host}:${port}`);
    },
  };
}
