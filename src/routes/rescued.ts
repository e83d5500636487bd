import type { IncomingHttpHeaders, ServerResponse } from 'node:http';
import type { FastifyBaseLogger, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { RequestNotes } from '../http/request-notes.js';
import type { ApiEndpoint, Dialect } from '../dialects/types.js';
import { GatewayError, failureLog, fromUpstreamFailure } from '../http/errors.js';
import type { RescueDeps } from '../rescue/context.js';
import { serve } from '../rescue/index.js';
import { readIncoming } from '../rescue/request.js';
import { ClientGone } from '../upstream/client-gone.js';
import { collectBody, type ReceivedBody } from './request-body.js';
import { headerValue, queryWithoutKey, requestHeadersForUpstream } from '../upstream/headers.js';
import { ClientResponse } from '../upstream/relay.js';
import { refusal, type Upstream } from '../upstream/upstreams.js';
import { assertSafePath, assertSafeSegment } from '../upstream/target.js';
import { glancedModel, modelOfReceived } from './body-model.js';
import { noteRequested } from '../telemetry/traces.js';
import { pathOf, queryOf } from '../lib/url.js';

/** One API's rescued endpoint: where it listens, where it goes upstream, and its dialect. */
interface RescuedEndpoint extends ApiEndpoint {
  dialect: Dialect;
}

/** Registers each dialect's rescued endpoints; their bodies arrive as raw bytes, never parsed on the way in. */
export async function rescuedRoutes(app: FastifyInstance, opts: { deps: RescueDeps; dialects: readonly Dialect[] }): Promise<void> {
  app.removeAllContentTypeParsers();
  const limit = opts.deps.config.server.bodyLimitBytes;
  app.addContentTypeParser('*', (_request, payload, done) => collectBody(payload, limit, done));
  const endpoints = opts.dialects.flatMap((dialect) => dialect.endpoints.map((e): RescuedEndpoint => ({ ...e, dialect })));
  for (const endpoint of endpoints) {
    app.post(endpoint.path, (request, reply) => handle(opts.deps, endpoint, request, reply));
    // And under each upstream's prefix: `/anthropic/v1/messages` is /v1/messages against `anthropic`.
    for (const upstream of opts.deps.upstreams.all) {
      app.post(`/${upstream.name}${endpoint.path}`, (request, reply) => handle(opts.deps, endpoint, request, reply, upstream));
    }
  }
}

interface RescuedExchange {
  id: string;
  url: string;
  headers: IncomingHttpHeaders;
  log: FastifyBaseLogger;
  notes: RequestNotes;
  res: ServerResponse;
  /** The route's parameters (a model named in the path). */
  params?: Record<string, string>;
}

function handle(
  deps: RescueDeps,
  endpoint: RescuedEndpoint,
  request: FastifyRequest,
  reply: FastifyReply,
  prefixed?: Upstream,
): Promise<void> {
  reply.hijack();
  const params = (request.params ?? {}) as Record<string, string>;
  const exchange = {
    id: request.id,
    url: request.url,
    headers: request.headers,
    log: request.log,
    notes: request.notes!,
    res: reply.raw,
    params,
  };
  const body = request.body as ReceivedBody | undefined;
  // The rescue holds the body as long as it needs it, not for as long as the answer streams.
  request.body = undefined;
  return serveRescued(deps, endpoint, exchange, body, prefixed);
}

/**
 * The client's bytes go upstream unchanged, and no status is written to the client before the
 * upstream's answer has been seen (and, when it was refused as overlong, rescued).
 */
async function serveRescued(
  deps: RescueDeps,
  endpoint: RescuedEndpoint,
  exchange: RescuedExchange,
  body: ReceivedBody | undefined,
  prefixed?: Upstream,
): Promise<void> {
  const params = exchange.params ?? {};
  const api = endpoint.dialect.api;
  const client = new ClientResponse(exchange.res, exchange.id, api);
  const upstreamPath = typeof endpoint.upstreamPath === 'string' ? endpoint.upstreamPath : endpoint.upstreamPath(params);
  const pathModel = endpoint.model?.(params);
  // A model named in the path goes into the upstream's path: one that would resolve elsewhere there goes nowhere.
  const unsafe = unsafePath(pathOf(exchange.url), upstreamPath, pathModel);
  if (unsafe) {
    exchange.log.info({ api }, `answered 400 invalid_path: ${unsafe.message}`);
    client.sendError(unsafe);
    return;
  }
  // Read whole only where a route goes by it: else a glance serves the log and the window.
  const model = pathModel ?? (deps.upstreams.readsModel ? await modelOfReceived(body) : glancedModel(body));
  exchange.notes.model = typeof model === 'string' ? model : undefined;
  noteRequested(api, exchange.notes.model);
  // The upstream: the one the prefix names, else the first route matching the API and the model, else the default.
  const upstream = prefixed ? deps.upstreams.prefixed(prefixed, api) : deps.upstreams.pick(api, model);
  if ('refused' in upstream) {
    const refused = refusal(upstream);
    // The client's base URL or model, not an operating condition: one plain line at info.
    exchange.log.info({ api, model: exchange.notes.model }, `answered ${refused.status} ${refused.code}: ${upstream.refused}`);
    client.sendError(refused);
    return;
  }
  exchange.notes.upstream = upstream.name;
  const gone = whenClientLeaves(exchange.res);
  const hop = { address: exchange.res.socket?.remoteAddress, host: exchange.headers.host };
  const gatewayKeys = deps.config.auth.keys.length > 0;
  const headers = requestHeadersForUpstream(
    exchange.headers,
    exchange.id,
    { apiKey: upstream.apiKey, style: endpoint.dialect.credential, gatewayKeys },
    hop,
  );
  // A stream whose failure may come after its preamble must be readable event by event.
  if (endpoint.dialect.streamEvent && headers['accept-encoding'] !== undefined) headers['accept-encoding'] = 'identity';
  // A key in the query is the client's: it goes no further where the gateway sends its own, or is a gateway key.
  const dropsKey = upstream.apiKey !== undefined || gatewayKeys;
  const query = queryOf(exchange.url);
  const rest = query ? queryWithoutKey(query.slice(1), dropsKey) : '';
  // A query that was only the key goes with it.
  const search = query === '' || (dropsKey && rest === '') ? '' : `?${rest}`;
  const ctx = {
    deps,
    upstream,
    dialect: endpoint.dialect,
    path: `${upstream.target.basePath}${upstreamPath}${search}`,
    incoming: readIncoming(
      body?.chunks,
      headerValue(exchange.headers['content-encoding']),
      deps.config.server.bodyLimitBytes,
      body?.decoded,
    ),
    pathModel,
    headers,
    clientHeaders: endpoint.dialect.credential === 'x-goog-api-key' ? withQueryKey(exchange.headers, query.slice(1)) : exchange.headers,
    log: exchange.log,
    gone,
    requestId: exchange.id,
    notes: exchange.notes,
  };
  try {
    const outcome = await serve(ctx, () => client.committed);
    await client.relay(
      outcome.answer.response,
      outcome.answer.held,
      outcome.header ? { 'x-gateway-compaction': outcome.header } : undefined,
      outcome.tail,
    );
  } catch (err) {
    failed(exchange, client, gone, err);
  }
}

/** Why a path may not be served: the client's path or the upstream path built from it would leave the base path once decoded. */
function unsafePath(clientPath: string, upstreamPath: string, pathModel: string | undefined): GatewayError | null {
  try {
    assertSafePath(clientPath);
    assertSafePath(upstreamPath);
    if (pathModel !== undefined) assertSafeSegment(pathModel);
    return null;
  } catch (err) {
    return err as GatewayError;
  }
}

/** With a Gemini `?key=` read as the `x-goog-api-key` it stands for: a tenant of its own, and the summarizer's credential. */
function withQueryKey(headers: IncomingHttpHeaders, query: string): IncomingHttpHeaders {
  if (headers['x-goog-api-key'] !== undefined || !query.includes('key=')) return headers;
  const key = new URLSearchParams(query).get('key');
  return key ? { ...headers, 'x-goog-api-key': key } : headers;
}

/** Aborts upstream and summarizer work the moment the client disconnects before its answer ends. */
function whenClientLeaves(res: ServerResponse): ClientGone {
  const gone = new ClientGone();
  res.once('close', () => {
    if (!res.writableFinished) gone.abort();
  });
  return gone;
}

function failed(request: Pick<RescuedExchange, 'log' | 'notes'>, client: ClientResponse, gone: ClientGone, err: unknown): void {
  const clientLeft =
    gone.aborted || (err as { code?: string })?.code === 'ERR_STREAM_PREMATURE_CLOSE' || (client.gone && !client.committed);
  if (clientLeft) {
    request.log.info({ reason: (err as Error)?.message }, 'client disconnected; upstream work aborted');
    return;
  }
  if (client.committed) {
    // The status is out: the only honest signal left is to cut the connection.
    const cause = err instanceof GatewayError ? err : fromUpstreamFailure(err);
    const { fields, message } = failureLog(cause, request.notes.upstreamStatus);
    request.log.warn({ upstream: request.notes.upstream, ...fields }, message);
    client.sendError(new GatewayError('upstream_bad_response'));
    return;
  }
  const gatewayError = err instanceof GatewayError ? err : new GatewayError('internal_error', undefined, { cause: err });
  const { fields, message } = failureLog(gatewayError);
  // As the pass-through's line: which upstream failed, then what the client got.
  const said = { upstream: request.notes.upstream, ...fields };
  // A bug keeps its stack; an upstream that failed is one plain line with what the client got.
  if (gatewayError.code === 'internal_error') request.log.error({ ...said, err }, message);
  else request.log.warn(said, message);
  client.sendError(gatewayError);
}
