import proxy from '@fastify/http-proxy';
import type { IncomingMessage } from 'node:http';
import { Transform } from 'node:stream';
import { errorCodes, type FastifyInstance } from 'fastify';
import type { Dispatcher } from 'undici';
import type { Config } from '../config/schema.js';
import { GatewayError, failureLog, fromUpstreamFailure } from '../errors.js';
import { DROP_FROM_STREAMED, requestHeadersForUpstream, responseHeadersForClient, type CredentialStyle } from '../upstream/headers.js';
import { assertSafePath, type UpstreamTarget } from '../upstream/target.js';

export interface PassthroughDeps {
  config: Readonly<Config>;
  dispatcher: Dispatcher;
  target: UpstreamTarget;
  /** `/v1` (OpenAI, Anthropic), or `/v1beta` (Gemini, whose base URL is the origin: the prefix goes upstream as it came). */
  apiPrefix: '/v1' | '/v1beta';
}


/**
 * Every other /v1/* path (models, embeddings, completions, responses, audio, files...): bodies
 * streamed untouched both ways through @fastify/http-proxy, on the gateway's one dispatcher.
 */
export async function passthroughRoutes(app: FastifyInstance, deps: PassthroughDeps): Promise<void> {
  // reply-from logs every upstream failure itself, with its stack, before onError runs (and
  // ignores disableRequestLogging for that line). On these routes request.log is quiet below
  // error; onError below writes the one line, through the plugin's own logger.
  app.addHook('onRoute', (route) => {
    route.logLevel = 'error';
  });
  const log = app.log;
  // In place of the plugin's own parsers (which hand the body on unchecked): the same stream, within the body limit.
  const limit = deps.config.server.bodyLimitBytes;
  app.addContentTypeParser('application/json', (_request, payload, done) => limited(payload, limit, done));
  app.addContentTypeParser('*', (_request, payload, done) => limited(payload, limit, done));
  await app.register(proxy, {
    proxyPayloads: false,
    upstream: deps.target.origin,
    prefix: deps.apiPrefix,
    rewritePrefix: deps.apiPrefix === '/v1' ? deps.target.basePath : `${deps.target.basePath}/v1beta`,
    undici: deps.dispatcher,
    disableRequestLogging: true,
    preHandler: async (request) => {
      const url = request.raw.url ?? '';
      const q = url.indexOf('?');
      assertPassthroughPath(q >= 0 ? url.slice(0, q) : url, deps.apiPrefix);
    },
    replyOptions: {
      rewriteRequestHeaders: (request, headers) => {
        const style = credentialStyle(request.url);
        const hop = { address: request.raw.socket.remoteAddress, host: request.headers.host };
        const out = requestHeadersForUpstream(headers, request.id, { apiKey: deps.config.upstream.apiKey, style }, hop, DROP_FROM_STREAMED);
        // reply-from set host to the upstream's; keep it.
        out.host = String(headers.host);
        return out;
      },
      rewriteHeaders: (headers, request) => responseHeadersForClient(headers, request?.id ?? '') as typeof headers,
      onError: (reply, { error }) => {
        const cause = (error as { cause?: unknown }).cause ?? error;
        if (reply.request.raw.socket.destroyed) {
          // The client left (or was cut for sending too slowly) mid-body: nobody to answer, and not the upstream's doing.
          log.info({ requestId: reply.request.id, reason: (cause as Error)?.message }, 'client disconnected; upstream request aborted');
          return;
        }
        if (isTooLarge(cause)) {
          // The body passed the limit on its way up: the upstream request is aborted; the client may still be sending.
          reply.code(413).header('connection', 'close').send(new GatewayError('request_too_large').toJSON());
          return;
        }
        const gatewayError = error instanceof GatewayError ? error : fromUpstreamFailure(cause);
        const { fields, message } = failureLog(gatewayError);
        log.warn({ requestId: reply.request.id, ...fields }, message);
        reply.code(gatewayError.status).header('content-type', 'application/json; charset=utf-8').send(gatewayError.toJSON());
      },
      // Pass every answer through as it came: no hidden retries of a client's request.
      retryDelay: () => null,
    },
  });
}


/**
 * A body streamed upstream as it arrives, within the limit: a declared length over it is refused
 * before anything is read (Node's parser lets no more than a declared length through); a chunked
 * body is counted on its way, and fails the upstream request the moment it passes the limit.
 */
function limited(payload: IncomingMessage, limit: number, done: (err: Error | null, body?: unknown) => void): void {
  const declared = Number(payload.headers['content-length']);
  if (declared > limit) return done(new errorCodes.FST_ERR_CTP_BODY_TOO_LARGE());
  if (!Number.isNaN(declared)) return done(null, payload);
  let received = 0;
  const counted = new Transform({
    transform(chunk: Buffer, _encoding, next) {
      received += chunk.length;
      next(received > limit ? new errorCodes.FST_ERR_CTP_BODY_TOO_LARGE() : null, chunk);
    },
  });
  payload.on('error', (err) => counted.destroy(err));
  done(null, payload.pipe(counted));
}

function isTooLarge(err: unknown): boolean {
  return (err as { code?: string } | null)?.code === 'FST_ERR_CTP_BODY_TOO_LARGE';
}

/**
 * The router matches percent-decoded paths, so `/%76%31/models` reaches this route, while the
 * gateway-key check reads the raw URL. Only the literal `/v1/` prefix is served (the bare base
 * URL holds nothing an agent needs), and nothing that turns into a traversal when decoded twice.
 */
export function assertPassthroughPath(path: string, prefix: '/v1' | '/v1beta' = '/v1'): void {
  if (!path.startsWith(`${prefix}/`)) throw new GatewayError('not_found', `Unknown route: ${path}.`);
  assertSafePath(path);
}

/** Anthropic's own paths (count_tokens, batches) take the gateway's key as `x-api-key`, as /v1/messages does; the Gemini API's as `x-goog-api-key`. */
function credentialStyle(url: string): CredentialStyle | undefined {
  if (url.startsWith('/v1beta/')) return 'x-goog-api-key';
  return url === '/v1/messages' || url.startsWith('/v1/messages/') || url.startsWith('/v1/messages?') ? 'x-api-key' : undefined;
}
