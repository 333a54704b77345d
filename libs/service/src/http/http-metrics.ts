import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import { Counter, Histogram } from 'prom-client';

const requests = new Counter({
  name: 'tern_http_requests_total',
  help: 'HTTP requests answered, by method, route (the pattern, not the URL) and status code',
  labelNames: ['method', 'route', 'status'],
});

const duration = new Histogram({
  name: 'tern_http_request_duration_seconds',
  help: 'Time to answer an HTTP request, by method and route (the pattern, not the URL)',
  labelNames: ['method', 'route'],
  buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
});

/**
 * Request rate, errors and latency per route on every service's HTTP listener. The route is
 * Fastify's pattern (`/api/v1/tasks/:id`), so ids in URLs never become label values; a URL
 * no route matched counts as `unmatched`.
 */
export function installHttpMetrics(app: NestFastifyApplication): void {
  const fastify = app.getHttpAdapter().getInstance();
  fastify.addHook('onResponse', async (request, reply) => {
    const route = request.routeOptions.url ?? 'unmatched';
    requests.inc({ method: request.method, route, status: String(reply.statusCode) });
    duration.observe({ method: request.method, route }, reply.elapsedTime / 1000);
  });
}
