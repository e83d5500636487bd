import proxy from '@fastify/http-proxy';
import type { FastifyInstance } from 'fastify';
import type { Dispatcher } from 'undici';
import type { Config } from '../config/schema.js';
import { GatewayError, fromUpstreamFailure } from '../errors.js';
import { decodableEncodings, endToEnd, responseHeadersForClient } from '../upstream/headers.js';
import { assertSafePath, type UpstreamTarget } from '../upstream/target.js';

export interface PassthroughDeps {
  config: Readonly<Config>;
  dispatcher: Dispatcher;
  target: UpstreamTarget;
}

const CLIENT_CREDENTIALS = ['authorization', 'api-key', 'x-api-key'];

/**
 * Every other /v1/* path (models, embeddings, completions, responses, audio, files...): bodies
 * streamed untouched both ways through @fastify/http-proxy, on the gateway's one dispatcher.
 */
export async function passthroughRoutes(app: FastifyInstance, deps: PassthroughDeps): Promise<void> {
  await app.register(proxy, {
    upstream: deps.target.origin,
    prefix: '/v1',
    rewritePrefix: deps.target.basePath,
    undici: deps.dispatcher as never,
    disableRequestLogging: true,
    preHandler: async (request) => {
      const url = request.raw.url ?? '';
      const q = url.indexOf('?');
      assertPassthroughPath(q >= 0 ? url.slice(0, q) : url);
    },
    replyOptions: {
      rewriteRequestHeaders: (request, headers) => {
        const out: Record<string, string | string[]> = endToEnd(headers, DROP);
        // reply-from set host to the upstream's; keep it.
        out.host = String(headers.host);
        if (deps.config.upstream.apiKey) {
          for (const name of CLIENT_CREDENTIALS) delete out[name];
          out.authorization = `Bearer ${deps.config.upstream.apiKey}`;
        }
        if (typeof out['accept-encoding'] === 'string') out['accept-encoding'] = decodableEncodings(out['accept-encoding']);
        out['x-request-id'] = request.id;
        return out;
      },
      rewriteHeaders: (headers, request) => responseHeadersForClient(headers, request?.id ?? '') as typeof headers,
      onError: (reply, { error }) => {
        const cause = (error as { cause?: unknown }).cause ?? error;
        const gatewayError = error instanceof GatewayError ? error : fromUpstreamFailure(cause);
        reply.request.log.warn({ err: error, code: gatewayError.code }, 'passthrough upstream failure');
        reply.code(gatewayError.status).header('content-type', 'application/json; charset=utf-8').send(gatewayError.toJSON());
      },
      // Pass every answer through as it came: no hidden retries of a client's request.
      retryDelay: () => null,
    },
  });
}

const DROP = new Set(['x-request-id', 'x-gateway-compaction']);

/** `%252e`, `%252f`, `%255c`, `%2500`: a dot, slash, backslash or NUL for a server that decodes twice. */
const DOUBLE_ENCODED = /%25(2e|2f|5c|00)/i;

/**
 * The router matches percent-decoded paths, so `/%76%31/models` reaches this route, while the
 * gateway-key check reads the raw URL. Only the literal `/v1/` prefix is served (the bare base
 * URL holds nothing an agent needs), and nothing that turns into a traversal when decoded twice.
 */
export function assertPassthroughPath(path: string): void {
  if (!path.startsWith('/v1/')) throw new GatewayError('not_found', `Unknown route: ${path}.`);
  if (DOUBLE_ENCODED.test(path)) throw new GatewayError('invalid_path');
  assertSafePath(path);
}
