import type { FastifyInstance } from 'fastify';
import { errorBody } from '../errors.js';
import type { Metrics } from '../metrics.js';

export interface HealthDeps {
  metrics: Metrics;
  /** True once shutdown has begun: readiness fails so load balancers stop sending traffic. */
  isDraining: () => boolean;
}

export async function healthRoutes(app: FastifyInstance, deps: HealthDeps): Promise<void> {
  app.get('/healthz', async () => ({ status: 'ok' }));
  app.get('/readyz', async (_request, reply) => {
    if (deps.isDraining()) return reply.code(503).send(errorBody('shutting_down'));
    return { status: 'ready' };
  });
  app.get('/metrics', async (_request, reply) => {
    reply.header('content-type', deps.metrics.registry.contentType);
    return deps.metrics.registry.metrics();
  });
}
