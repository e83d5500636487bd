import proxy from '@fastify/http-proxy';
import type { IncomingMessage } from 'node:http';
import { Readable, Transform } from 'node:stream';
import { errorCodes, type FastifyInstance, type FastifyRequest } from 'fastify';
import type { Dispatcher } from 'undici';
import type { Config } from '../config/schema.js';
import { DecodedSize, codingsOf } from '../upstream/content-coding.js';
import { GatewayError, failureLog, fromUpstreamFailure } from '../http/errors.js';
import { DIALECTS, apiOfPath, underBase } from '../dialects/index.js';
import type { Api, ApiPrefix, CredentialStyle } from '../dialects/types.js';
import { DROP_FROM_STREAMED, queryWithoutKey, requestHeadersForUpstream, responseHeadersForClient } from '../upstream/headers.js';
import { assertSafePath, assertSafeSegment } from '../upstream/target.js';
import { refusal, type RequestModel, type Upstream, type Upstreams } from '../upstream/upstreams.js';
import { modelOfReceived } from './body-model.js';
import { collectBody } from './request-body.js';
import { pathOf, queryOf } from '../lib/url.js';

export interface PassthroughDeps {
  config: Readonly<Config>;
  dispatcher: Dispatcher;
  upstreams: Upstreams;
  /** The upstream of the prefix `/NAME` this registration serves; absent: the plain prefix, routed request by request. */
  upstream?: Upstream;
  /** `/v1` (OpenAI, Anthropic), or `/v1beta` (Gemini); where it goes upstream, the APIs' descriptors say (`underBase`). */
  apiPrefix: ApiPrefix;
}

/**
 * Every other /v1/* path: bodies streamed untouched both ways through @fastify/http-proxy on the gateway's dispatcher. Registered per
 * upstream prefix (`/openai/v1/*`) and once for the plain prefix, routed by path API, body model (where a route reads it), else default.
 */
export async function passthroughRoutes(app: FastifyInstance, deps: PassthroughDeps): Promise<void> {
  // reply-from logs every upstream failure itself, with its stack, before onError runs (and
  // ignores disableRequestLogging for that line). On these routes request.log is quiet below
  // error; onError below writes the one line, through the plugin's own logger.
  app.addHook('onRoute', (route) => {
    route.logLevel = 'error';
  });
  const log = app.log;
  const { upstreams, apiPrefix, upstream: fixed } = deps;
  const prefix = fixed ? `/${fixed.name}${apiPrefix}` : apiPrefix;
  const gatewayKeys = deps.config.auth.keys.length > 0;
  const routed = new WeakMap<object, Upstream>();
  const upstreamOf = (request: object) => routed.get(request) ?? fixed!;
  const apiPath = (url: string) => (fixed ? url.slice(fixed.name.length + 1) : url);
  // In place of the plugin's own parsers (which hand the body on unchecked): the same stream, within the body limit.
  const limit = deps.config.server.bodyLimitBytes;
  // Where a route reads models, the body of a path in an API that names its model in the body is read for it.
  const models = new WeakMap<object, RequestModel>();
  const readsBody = (url: string) => !fixed && upstreams.readsModel && namesModelInBody(apiOfPath(url));
  const parse = (request: FastifyRequest, payload: IncomingMessage, done: (err: Error | null, body?: unknown) => void) =>
    readsBody(request.url) ? readModel(payload, limit, (model) => models.set(request, model), done) : limited(payload, limit, done);
  app.addContentTypeParser('application/json', parse);
  app.addContentTypeParser('*', parse);
  await app.register(proxy, {
    proxyPayloads: false,
    upstream: fixed ? fixed.target.origin : '',
    prefix,
    rewritePrefix: fixed ? upstreamPrefix(fixed, apiPrefix) : apiPrefix,
    undici: deps.dispatcher,
    disableRequestLogging: true,
    // The plain prefix: the path under the routed upstream's base path.
    handler: fixed
      ? undefined
      : (request, reply, dest, options) =>
          reply.from(upstreamPrefix(upstreamOf(request), apiPrefix) + dest.slice(apiPrefix.length), options),
    preHandler: async (request) => {
      const path = pathOf(apiPath(request.raw.url ?? ''));
      assertPassthroughPath(path, apiPrefix);
      const api = apiOfPath(path);
      const pathModel = api === undefined ? undefined : DIALECTS[api].pathModel;
      const model = pathModel ? pathModel(path) : models.get(request);
      if (pathModel && typeof model === 'string') assertSafeSegment(model);
      if (request.notes && typeof model === 'string') request.notes.model = model;
      const chosen = fixed ? upstreams.prefixed(fixed, api) : upstreams.pick(api, model);
      if ('refused' in chosen) throw refusal(chosen);
      routed.set(request, chosen);
      if (request.notes) request.notes.upstream = chosen.name;
    },
    replyOptions: {
      ...(fixed ? {} : { getUpstream: (request: object) => upstreamOf(request).target.origin }),
      rewriteRequestHeaders: (request, headers) => {
        const target = upstreamOf(request);
        const style = credentialStyle(apiPath(request.url));
        const hop = { address: request.raw.socket.remoteAddress, host: request.headers.host };
        const out = requestHeadersForUpstream(headers, request.id, { apiKey: target.apiKey, style, gatewayKeys }, hop, DROP_FROM_STREAMED);
        // reply-from set host to the upstream's; keep it.
        out.host = String(headers.host);
        return out;
      },
      // A Gemini key in the query is the client's: it goes no further where the gateway sends its own, or is a gateway key.
      queryString: (search, reqUrl, request) =>
        queryWithoutKey((search || queryOf(reqUrl)).replace(/^\?/, ''), upstreamOf(request).apiKey !== undefined || gatewayKeys),
      rewriteHeaders: (headers, request) => responseHeadersForClient(headers, request?.id ?? '') as typeof headers,
      onError: (reply, { error }) => {
        const cause = (error as { cause?: unknown }).cause ?? error;
        const api = apiOfPath(apiPath(reply.request.url));
        if (reply.request.raw.socket.destroyed) {
          // The client left (or was cut for sending too slowly) mid-body: nobody to answer, and not the upstream's doing.
          log.info({ requestId: reply.request.id, reason: (cause as Error)?.message }, 'client disconnected; upstream request aborted');
          return;
        }
        if (isTooLarge(cause)) {
          // The body passed the limit on its way up: the upstream request is aborted; the client may still be sending.
          reply.code(413).header('connection', 'close').send(new GatewayError('request_too_large').bodyFor(api));
          return;
        }
        const gatewayError = error instanceof GatewayError ? error : fromUpstreamFailure(cause);
        const { fields, message } = failureLog(gatewayError);
        log.warn({ requestId: reply.request.id, upstream: upstreamOf(reply.request).name, ...fields }, message);
        reply.code(gatewayError.status).header('content-type', 'application/json; charset=utf-8').send(gatewayError.bodyFor(api));
      },
      // Pass every answer through as it came: no hidden retries of a client's request.
      retryDelay: () => null,
    },
  });
}

function upstreamPrefix(upstream: Upstream, apiPrefix: ApiPrefix): string {
  return underBase(upstream.target.basePath, apiPrefix);
}

/**
 * The whole body is read before routing (the model the upstream reads may be its last key), decoded as the rescued routes do; the
 * same bytes go on.
 */
function readModel(
  payload: IncomingMessage,
  limit: number,
  noted: (model: RequestModel) => void,
  done: (err: Error | null, body?: unknown) => void,
): void {
  collectBody(payload, limit, (err, body) => {
    if (err || !body) return done(err);
    void Promise.resolve(body.chunks.length === 0 ? undefined : modelOfReceived(body)).then((model) => {
      noted(model);
      done(null, Readable.from(body.chunks, { objectMode: false }));
    });
  });
}

/** A path of an API whose requests name their model in the body (every API but one whose paths name it). */
function namesModelInBody(api: Api | undefined): boolean {
  return api !== undefined && DIALECTS[api].pathModel === undefined;
}

/**
 * A declared length over the limit is refused before reading (Node's parser lets no more through); a chunked or compressed body is
 * counted on its way (a few KB of gzip can inflate to gigabytes) and fails the upstream request the moment it passes the limit.
 */
function limited(payload: IncomingMessage, limit: number, done: (err: Error | null, body?: unknown) => void): void {
  const declared = Number(payload.headers['content-length']);
  if (declared > limit) return done(new errorCodes.FST_ERR_CTP_BODY_TOO_LARGE());
  const codings = codingsOf(payload.headers['content-encoding']);
  // A coding the gateway cannot undo goes as sent, unchecked, as on the rescued routes.
  const decoded = codings && codings.length > 0 ? new DecodedSize(codings, limit) : undefined;
  if (!Number.isNaN(declared) && !decoded) return done(null, payload);
  let received = 0;
  // A compressed body's last chunk waits for the count: with it, the upstream would have the whole body.
  let last: Buffer | undefined;
  const tooLarge = () => new errorCodes.FST_ERR_CTP_BODY_TOO_LARGE();
  const counted = new Transform({
    transform(chunk: Buffer, _encoding, next) {
      received += chunk.length;
      if (!decoded) return next(received > limit ? tooLarge() : null, chunk);
      decoded.write(chunk);
      const ready = last;
      last = chunk;
      next(received > limit || decoded.outcome === 'over' ? tooLarge() : null, ready);
    },
    flush(next) {
      if (!decoded) return next();
      void decoded.end().then((outcome) => next(outcome === 'over' ? tooLarge() : null, last));
    },
  });
  payload.on('error', (err) => counted.destroy(err));
  done(null, payload.pipe(counted));
}

function isTooLarge(err: unknown): boolean {
  return (err as { code?: string } | null)?.code === 'FST_ERR_CTP_BODY_TOO_LARGE';
}

/**
 * The router matches percent-decoded paths (`/%76%31/models`) while the key check reads the raw URL: only a literal `/v1/`,
 * nothing that decodes twice into a traversal.
 */
export function assertPassthroughPath(path: string, prefix: ApiPrefix = '/v1'): void {
  if (!path.startsWith(`${prefix}/`)) throw new GatewayError('not_found', `Unknown route: ${path}.`);
  assertSafePath(path);
}

/** Every path of an API takes the gateway's key as the API does (Anthropic's count_tokens and batches as `x-api-key`); a path of none as a Bearer token. */
function credentialStyle(url: string): CredentialStyle | undefined {
  const api = apiOfPath(url);
  return api === undefined ? undefined : DIALECTS[api].credential;
}
