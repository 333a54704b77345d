import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import fastifyStatic from '@fastify/static';
import { type NestFastifyApplication } from '@nestjs/platform-fastify';

/** Where `npm run build` puts the dashboard (ui/, bundled by Vite): dist/ui beside dist/apps. */
export const DASHBOARD_DIR = fileURLToPath(new URL('../../../ui/', import.meta.url));

/**
 * The operators' dashboard at /ui/: static files only, no token needed to load them; every
 * figure on its pages comes from the public API with the token signed in with.
 */
export async function serveDashboard(app: NestFastifyApplication): Promise<void> {
  const fastify = app.getHttpAdapter().getInstance();
  fastify.get('/ui', (_request, reply) => reply.redirect('/ui/'));
  if (!existsSync(DASHBOARD_DIR)) {
    fastify.get('/ui/*', (_request, reply) =>
      reply.code(404).send({ statusCode: 404, error: 'Not Found', message: 'the dashboard is not built: run npm run build' }),
    );
    return;
  }
  await app.register(fastifyStatic, { root: DASHBOARD_DIR, prefix: '/ui/', decorateReply: false });
}
