import type { AddressInfo } from 'node:net';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { contentAccess } from '../status/access.js';
import { SCRIPT, STYLE } from '../status/assets.js';
import { statusDocument, type StatusSources } from '../status/document.js';
import { renderPage } from '../status/page.js';

/** The page, its data, and its two files: what a gateway key opens when auth is on (server.ts). */
export const STATUS_PATHS = new Set(['/status', '/status.json', '/status.js', '/status.css']);

/** Nothing but the page's own files runs or loads on it; it is never framed, cached or referred from. */
const PAGE_HEADERS = {
  'content-security-policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'cache-control': 'no-store',
};

export async function statusRoutes(app: FastifyInstance, given: StatusSources): Promise<void> {
  const sources = { ...given, port: () => portOf(app.server.address()) };
  // With gateway keys on, a request reaches a route only with one (server.ts addKeyCheck).
  const keyed = sources.config.auth.keys.length > 0;
  const document = (request: FastifyRequest) =>
    statusDocument(sources, contentAccess(sources.config, { keyed, host: request.headers.host }));
  app.get('/status.json', async (request, reply) => {
    reply.headers(PAGE_HEADERS);
    return document(request);
  });
  app.get('/status', async (request, reply) => {
    reply.headers(PAGE_HEADERS).type('text/html; charset=utf-8');
    return renderPage(await document(request));
  });
  app.get('/status.js', async (_request, reply) => reply.headers(PAGE_HEADERS).type('text/javascript; charset=utf-8').send(SCRIPT));
  app.get('/status.css', async (_request, reply) => reply.headers(PAGE_HEADERS).type('text/css; charset=utf-8').send(STYLE));
}

function portOf(address: AddressInfo | string | null): number | undefined {
  return typeof address === 'object' && address !== null ? address.port : undefined;
}
