import { randomUUID } from 'node:crypto';
import { STATUS_CODES, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import Fastify, {
  LogController,
  type FastifyBaseLogger,
  type FastifyError,
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
} from 'fastify';
import type { Dispatcher } from 'undici';
import type { DestinationStream } from 'pino';
import './http/request-notes.js';
import { basicPassword, createKeyCheck } from './http/auth.js';
import type { Config } from './config/schema.js';
import { ERRORS, GatewayError, errorBody, errorBodyFor, failureLog } from './http/errors.js';
import { accessLogger, type AccessLog } from './telemetry/access-log.js';
import { lazyChildLogger } from './telemetry/lazy-child-logger.js';
import { stdoutDestination } from './telemetry/log-destination.js';
import { loggerOptions } from './telemetry/logging.js';
import { createMemory } from './memory/index.js';
import { createMetrics, type Metrics } from './telemetry/metrics.js';
import { API_PREFIXES, APIS, DIALECTS } from './dialects/index.js';
import { healthRoutes } from './routes/health.js';
import { passthroughRoutes } from './routes/passthrough.js';
import { rescuedRoutes } from './routes/rescued.js';
import { STATUS_PATHS, statusRoutes } from './routes/status.js';
import { keepsContent } from './status/access.js';
import { RecentDecisions } from './status/recent.js';
import { gatewayVersion } from './process/version.js';
import { RescueBudget, defaultRescueBudget } from './rescue/budget.js';
import { configuredSummarizers } from './rescue/summarizer-credentials.js';
import { Discoverer } from './upstream/discover.js';
import { Windows } from './upstream/windows.js';
import { createEgress } from './upstream/client.js';
import { apiOfUrl, byPrefix, resolveUpstreams, type Upstreams } from './upstream/upstreams.js';
import { noteRecorded, tracedRequests, tracesUrl } from './telemetry/traces.js';
import { Listeners, primaryHost } from './http/listeners.js';
import type { RequestNotes } from './http/request-notes.js';
import { pathOf } from './lib/url.js';

export interface ServerDeps {
  /** Where log lines go (default stdout); tests capture them here. */
  logStream?: DestinationStream;
  /** The undici dispatcher for upstream calls (default: one pool per origin, built from config; see egress.ts). */
  dispatcher?: Dispatcher;
  metrics?: Metrics;
  /** Where HTTPS_PROXY, HTTP_PROXY and NO_PROXY are read (default: the process's environment). */
  env?: Record<string, string | undefined>;
}

declare module 'fastify' {
  interface FastifyInstance {
    /** Begin shutdown: readiness fails from now on. */
    startDraining(): void;
    upstreams: Upstreams;
    /** Listens on `host` (both loopbacks for `localhost`, see http/listeners.ts) and `port`. */
    listenOn(host: string, port: number): Promise<void>;
    closeIdleConnections(): void;
  }
}

export function buildServer(config: Readonly<Config>, deps: ServerDeps = {}): FastifyInstance {
  const upstreams = resolveUpstreams(config);
  const modelNames = config.auth.metricsKey !== undefined || config.auth.metricsModelNames;
  const metrics =
    deps.metrics ??
    createMetrics(
      upstreams.all.map((u) => u.name),
      configuredSummarizers(config, upstreams),
      { modelNames },
    );
  const ownDispatcher = !deps.dispatcher;
  const dispatcher = deps.dispatcher ?? createEgress(config, upstreams, deps.env ?? process.env);
  const logStream = deps.logStream ?? stdoutDestination(config.log.format);
  const accessLog = accessLogger(config.log.level, logStream);
  let draining = false;
  const traced = tracesUrl(config.telemetry) !== undefined;
  const listeners = new Listeners({
    timeouts: config.server,
    // One server span per request (telemetry/traces.ts); untraced, nothing is added.
    wrap: (handler) => (traced ? tracedRequests(handler, (path) => QUIET.has(path)) : handler),
    clientError: answerClientError,
  });

  const app = Fastify({
    serverFactory: listeners.factory,
    logger: { ...loggerOptions(config.log.level), stream: logStream },
    // One line per request, written by the onResponse hook below with the upstream's figures.
    logController: new LogController({ disableRequestLogging: true, requestIdLogLabel: 'requestId' }),
    requestIdHeader: false,
    childLoggerFactory: lazyChildLogger,
    genReqId: (req: IncomingMessage) => requestIdOf(req),
    bodyLimit: config.server.bodyLimitBytes,
    clientErrorHandler: answerClientError,
    // Requests that reach a draining gateway get its own answers (below), in their API's shape.
    return503OnClosing: false,
    // Errors fastify raises before routing (a path that is not valid percent-encoding).
    frameworkErrors: (error, _request, reply) => {
      const code = error.code === 'FST_ERR_BAD_URL' ? 'invalid_path' : 'bad_request';
      // The message quotes the URL: never its query, which may carry a key (`?key=`).
      (reply as FastifyReply).code(400).send(errorBody(code, `${ERRORS[code].message} (${error.message.replace(/\?[^'"\s]*/g, '')})`));
    },
  });

  app.decorate('startDraining', () => {
    draining = true;
  });
  app.decorate('listenOn', async (host: string, port: number) => {
    await app.listen({ host: primaryHost(host), port });
    await listeners.alsoListen(host, (app.server.address() as AddressInfo).port);
  });
  app.decorate('closeIdleConnections', () => listeners.closeIdle());
  // The other addresses stop taking connections when fastify's own server does, and are waited for.
  let othersClosed: Promise<void> | undefined;
  app.addHook('preClose', (done) => {
    draining = true;
    othersClosed = listeners.closeOthers();
    done();
  });
  app.addHook('onClose', async () => othersClosed);
  app.decorate('upstreams', upstreams);
  app.decorateRequest('notes', null);
  // Callback hooks, not async ones: they run on every request, and a promise each is not free.
  app.addHook('onRequest', (request, reply, done) => {
    request.notes = { route: routeLabel(request.routeOptions.url, request.url, upstreams) };
    reply.header('x-request-id', request.id);
    // Draining: a request on a connection still open gets a 503 (the probes answer for themselves).
    if (draining && !PROBES.has(request.routeOptions.url ?? '')) return done(new GatewayError('shutting_down'));
    // `gzip, chunked`: Node undoes the chunking and nothing here undoes the rest (RFC 9112 6.1 allows a 501; a 400 says it in the API's shape).
    const coding = request.headers['transfer-encoding'];
    done(
      coding === undefined || coding.trim().toLowerCase() === 'chunked'
        ? undefined
        : new GatewayError(
            'bad_request',
            `Transfer-Encoding '${coding}' is not supported: send the body chunked, or with a Content-Length.`,
          ),
    );
  });
  const keyCheck = config.auth.keys.length > 0 ? createKeyCheck(config.auth.keys) : null;
  if (keyCheck) addKeyCheck(app, keyCheck);
  // After a hijack (the chat route), reply.statusCode still reads the raw response's status.
  app.addHook('onResponse', (request, reply, done) => {
    recordRequest(metrics, accessLog, request, reply.statusCode, reply.elapsedTime);
    done();
  });

  const logError = (request: { id: string; log: FastifyBaseLogger }, error: Error, gatewayError: GatewayError) => {
    // A bug gets its stack; an operating condition (an upstream down) gets one plain line.
    if (gatewayError.code === 'internal_error') request.log.error({ err: error }, 'request failed');
    else if (gatewayError.status >= 500) {
      const { fields, message } = failureLog(gatewayError);
      // Through app.log: pass-through routes keep request.log at error (see passthrough.ts).
      app.log.warn({ requestId: request.id, ...fields }, message);
    }
  };
  app.setErrorHandler((error: FastifyError, request, reply) => {
    const gatewayError = toGatewayError(error);
    logError(request, error, gatewayError);
    // Answered before its body was read (a 401, a 413): the client may keep sending it slowly or for ever; Node closes the connection
    // after this answer. A 401 with requests pipelined behind it too: they were sent before the client saw it, and none of them runs.
    const pipelined = (waiting.get(request.raw.socket) ?? 0) > 0;
    const closes =
      (gatewayError.status === 401 && pipelined) ||
      gatewayError.code === 'shutting_down' ||
      (!request.raw.complete && hasBody(request.headers));
    if (closes) reply.header('connection', 'close');
    reply.code(gatewayError.status).send(gatewayError.bodyFor(apiOfUrl(upstreams, request.url)));
  });
  app.setNotFoundHandler((request, reply) => {
    reply
      .code(404)
      .send(errorBodyFor(apiOfUrl(upstreams, request.url), 'not_found', notFoundMessage(request.method, pathOf(request.url), upstreams)));
  });

  app.register(healthRoutes, { metrics, isDraining: () => draining, metricsKey: config.auth.metricsKey });
  const memory = createMemory(config, metrics, app.log);
  const budget = new RescueBudget(config.compaction.rescueBudgetBytes ?? defaultRescueBudget(), metrics.rescueBudget);
  const windows = new Windows(new Discoverer(dispatcher), (upstream, model, found) =>
    app.log.info(
      { upstream: upstream.name, model, windowTokens: found.tokens, from: found.from },
      `upstream ${upstream.name} runs ${model} with a context window of ${found.tokens} tokens (${found.from}); requests that would pass it are made to fit before they are sent`,
    ),
  );
  const recent = config.status.enabled ? new RecentDecisions(keepsContent(config)) : undefined;
  const rescueDeps = { config, dispatcher, upstreams, metrics, memory, budget, windows, decisions: recent };
  if (recent) app.register(statusRoutes, { config, upstreams, windows, metrics, recent, version: gatewayVersion(), startedAt: new Date() });
  app.register(rescuedRoutes, { deps: rescueDeps, dialects: APIS.map((api) => DIALECTS[api]) });
  if (memory) app.addHook('onClose', async () => memory.close());
  // Each upstream under its own prefix, and the plain /v1 and /v1beta routed request by request.
  for (const apiPrefix of API_PREFIXES) {
    for (const upstream of upstreams.all) app.register(passthroughRoutes, { config, dispatcher, upstreams, upstream, apiPrefix });
    app.register(passthroughRoutes, { config, dispatcher, upstreams, apiPrefix });
  }
  if (ownDispatcher) app.addHook('onClose', async () => dispatcher.close());
  return app;
}

/** Health probes and metric scrapes: open without a gateway key, and logged at debug. */
const PROBES = new Set(['/healthz', '/readyz', '/metrics']);
/** Probes and the status page (which asks again every few seconds): logged at debug, never traced. */
const QUIET = new Set([...PROBES, ...STATUS_PATHS]);

function addKeyCheck(app: FastifyInstance, check: ReturnType<typeof createKeyCheck>): void {
  app.addHook('onRequest', async (request, reply) => {
    // The matched route, not the raw URL: the router decodes it (/%76%31/… is /v1/…).
    const route = request.routeOptions.url ?? '';
    if (PROBES.has(route)) return;
    // Pipelined behind a request still being answered: its turn first. Node hands over every request of a pipeline at once; a 401
    // before this one closes the connection, and then this one must not run.
    if (reply.raw.socket === null && !(await turnComes(reply.raw, request.raw.socket))) {
      throw new GatewayError('bad_request', 'The connection was closed before this pipelined request could be answered.');
    }
    const apiKey = request.headers['x-api-key'] ?? request.headers['x-goog-api-key'];
    if (check(request.headers.authorization, apiKey)) return;
    // A browser sends no Bearer token: on the status page it is asked for the key as a password.
    if (STATUS_PATHS.has(route)) {
      if (check(undefined, basicPassword(request.headers.authorization))) return;
      reply.header(
        'www-authenticate',
        'Basic realm="compaction-gateway status (any user name, a gateway key as the password)", charset="UTF-8"',
      );
    }
    throw new GatewayError('invalid_api_key');
  });
}

const waiting = new WeakMap<Socket, number>();

/** Whether a response queued behind others on `socket` gets it (Node assigns it when the one before finishes), or the connection closes first. */
function turnComes(response: ServerResponse, socket: Socket): Promise<boolean> {
  waiting.set(socket, (waiting.get(socket) ?? 0) + 1);
  return new Promise<boolean>((resolve) => {
    const closed = () => resolve(false);
    socket.once('close', closed);
    response.once('socket', () => {
      socket.off('close', closed);
      resolve(true);
    });
  }).finally(() => waiting.set(socket, (waiting.get(socket) ?? 1) - 1));
}

function recordRequest(
  metrics: Metrics,
  accessLog: AccessLog,
  request: { id: string; method: string; url: string; notes: RequestNotes | null },
  status: number,
  elapsedMs: number,
): void {
  const notes = request.notes;
  noteRecorded(request.method, notes);
  const route = notes?.route ?? 'unmatched';
  metrics.requests.inc(route, request.method, status, notes?.upstream);
  metrics.duration.observe(route, elapsedMs / 1000);
  const fields = {
    requestId: request.id,
    method: request.method,
    path: pathOf(request.url),
    status,
    durationMs: Math.round(elapsedMs * 10) / 10,
    upstreamStatus: notes?.upstreamStatus,
    upstreamTtfbMs: notes?.upstreamTtfbMs === undefined ? undefined : Math.round(notes.upstreamTtfbMs * 10) / 10,
    model: notes?.model,
    upstream: notes?.upstream,
    streamed: notes?.streamed,
    compaction: notes?.compaction,
  };
  // Probes and scrapes every few seconds would drown the access log: they log at debug.
  if (QUIET.has(route)) accessLog.debug(fields, 'request completed');
  else accessLog.info(fields, 'request completed');
}

/**
 * The matched route; a pass-through's bounded endpoint family; a route under an upstream's prefix without it (the `upstream` label
 * says which).
 */
function routeLabel(matched: string | undefined, url: string, upstreams?: Upstreams): string {
  if (matched === undefined) return 'unmatched';
  const prefixed = upstreams && matched.length > 1 ? byPrefix(upstreams, matched) : null;
  if (prefixed) return routeLabel(prefixed.rest, url.slice(url.indexOf('/', 1)));
  const prefix = PASSTHROUGH_ROUTES.get(matched);
  if (prefix === undefined) return ENDPOINT_LABELS.get(matched) ?? matched;
  const own = OWN_PREFIX.get(prefix);
  if (own) return `passthrough_${own}`;
  const family = url.startsWith(`${prefix}/`) ? /^[^/?]*/.exec(url.slice(prefix.length + 1))![0] : '';
  return `passthrough_${PASSTHROUGH_FAMILIES.has(family) ? family : 'other'}`;
}

/** The routes @fastify/http-proxy registers for each API prefix, and the prefix. */
const PASSTHROUGH_ROUTES = new Map(API_PREFIXES.flatMap((p) => [p, `${p}/`, `${p}/*`].map((route) => [route, p] as const)));
/** A prefix one API has to itself (Gemini's `/v1beta`): its pass-through requests are that API's family. */
const OWN_PREFIX = new Map(
  API_PREFIXES.flatMap((p) => {
    const apis = APIS.filter((api) => DIALECTS[api].prefix === p);
    return apis.length === 1 ? [[p, apis[0]] as const] : [];
  }),
);
/** The families of a shared prefix's pass-through requests: each API's first path segment (`chat`), and two of no API. */
const PASSTHROUGH_FAMILIES = new Set([
  ...APIS.filter((api) => !OWN_PREFIX.has(DIALECTS[api].prefix)).flatMap((api) => DIALECTS[api].endpoints.map((e) => e.path.split('/')[2])),
  'embeddings',
  'models',
]);
/** The rescued routes metrics name otherwise than their pattern (Gemini's model parameter as `{model}`). */
const ENDPOINT_LABELS = new Map(
  APIS.flatMap((api) => DIALECTS[api].endpoints.flatMap((e) => (e.label ? [[e.path, e.label] as const] : []))),
);

function notFoundMessage(method: string, path: string, upstreams: Upstreams): string {
  const unknown = `Unknown route: ${method} ${path}.`;
  // Under an upstream's prefix too: `/openai/responses` is `/openai/v1/responses` without its /v1.
  const prefixed = byPrefix(upstreams, path);
  const [prefix, rest] = prefixed ? [`/${prefixed.upstream.name}`, prefixed.rest] : ['', path];
  const api = APIS.find((a) => DIALECTS[a].missingPrefix?.test(rest));
  if (api === undefined) return unknown;
  const under = `${prefix}${DIALECTS[api].prefix}`;
  return `${unknown} The gateway serves the API under ${under}: add ${DIALECTS[api].prefix} to the client's base URL (${method} ${under}${rest}).`;
}

function hasBody(headers: FastifyRequest['headers']): boolean {
  return headers['transfer-encoding'] !== undefined || Number(headers['content-length']) > 0;
}

/**
 * Requests Node's parser refuses before any route (CR/LF or NUL in a header, oversized headers) still get an OpenAI-shaped answer,
 * then a close.
 */
function answerClientError(err: Error & { code?: string }, socket: Duplex): void {
  if (!socket.writable) {
    socket.destroy();
    return;
  }
  const code =
    err.code === 'HPE_HEADER_OVERFLOW' ? 'headers_too_large' : err.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? 'request_timeout' : 'bad_request';
  const body = JSON.stringify(errorBody(code));
  const status = ERRORS[code].status;
  socket.end(
    `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\ncontent-type: application/json; charset=utf-8\r\n` +
      `content-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
  );
}

const REQUEST_ID = /^[\w.:@/+=-]{1,128}$/;

/** The client's own x-request-id when it is a sane token, else a new UUID. */
function requestIdOf(req: IncomingMessage): string {
  const given = req.headers['x-request-id'];
  return typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID();
}

function toGatewayError(error: FastifyError): GatewayError {
  if (error instanceof GatewayError) return error;
  switch (error.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new GatewayError('request_too_large', undefined, { cause: error });
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return new GatewayError('unsupported_media_type', error.message, { cause: error });
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
      return new GatewayError('invalid_json', error.message, { cause: error });
  }
  if (typeof error.statusCode === 'number' && error.statusCode >= 400 && error.statusCode < 500) {
    return new GatewayError('bad_request', error.message, { cause: error });
  }
  return new GatewayError('internal_error', undefined, { cause: error });
}
