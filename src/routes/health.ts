import type { FastifyInstance } from 'fastify';
import { createKeyCheck } from '../http/auth.js';
import { errorBody } from '../http/errors.js';
import type { Metrics } from '../telemetry/metrics.js';

export interface HealthDeps {
  metrics: Metrics;
  /** True once shutdown has begun: readiness fails so load balancers stop sending traffic. */
  isDraining: () => boolean;
  /** When set, /metrics answers only a scrape that presents it (Bearer or x-api-key); the probes stay open. */
  metricsKey?: string;
}

export async function healthRoutes(app: FastifyInstance, deps: HealthDeps): Promise<void> {
  app.get('/healthz', async () => ({ status: 'ok' }));
  app.get('/readyz', async (_request, reply) => {
    if (deps.isDraining()) return reply.code(503).send(errorBody('shutting_down'));
    return { status: 'ready' };
  });
  const scraper = deps.metricsKey ? createKeyCheck([deps.metricsKey]) : null;
  app.get('/metrics', async (request, reply) => {
    if (scraper && !scraper(request.headers.authorization, request.headers['x-api-key'])) {
      return reply.code(401).header('www-authenticate', 'Bearer').send(errorBody('invalid_api_key', 'Missing or invalid metrics key.'));
    }
    reply.header('content-type', deps.metrics.registry.contentType);
    return deps.metrics.registry.metrics();
  });
}
