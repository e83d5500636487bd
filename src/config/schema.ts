import { z } from 'zod';
import { APIS, type Api } from '../dialects/types.js';

export const MiB = 1024 * 1024;

export const DEFAULTS = {
  host: '127.0.0.1',
  port: 8080,
  bodyLimitBytes: 64 * MiB,
  shutdownGraceMs: 30_000,
  // A client has this long to send a whole request (a 64 MiB body at ~1 MB/s), and its headers.
  requestTimeoutMs: 120_000,
  headersTimeoutMs: 30_000,
  // Longer than common load balancers' idle timeouts (60 s), so the gateway is not the side that closes first.
  keepAliveTimeoutMs: 72_000,
  upstreamUrl: 'https://api.openai.com/v1',
  connectTimeoutMs: 10_000,
  // A 100k-token prompt can take minutes before its first token.
  firstByteTimeoutMs: 600_000,
  idleTimeoutMs: 300_000,
  errorBodyLimitBytes: 1 * MiB,
  // A stream's opening events are held this long at most for a failure that may follow them; then they go to the client.
  preambleHoldMs: 5_000,
  keepRecent: 6,
  maxReplays: 1,
  summarizerTimeoutMs: 60_000,
  summarizerMaxInputTokens: 60_000,
  summarizerMaxSummaryTokens: 2_000,
  // What one compaction may spend on the summarizer at most; past it the oldest part goes to the digest.
  summarizerMaxCalls: 16,
  summarizerMaxInputBytes: 4 * MiB,
  // Past this many bytes of conversations under rescue at once, a rescue waits this long, then the upstream's error is relayed.
  rescueWaitMs: 10_000,
  // A new compaction aims at this share of the limit, so the next turns fit under the same summary.
  targetRatio: 0.5,
  // A completion limit lowered below this is no help: compact instead.
  minCompletionTokens: 1024,
  memoryMaxBytes: 64 * MiB,
  memoryTtlSeconds: 24 * 60 * 60,
} as const;

/** An absolute http:// or https:// URL with a host: the one test, so one bad URL is one problem. */
export function isHttpUrl(text: string): boolean {
  return /^https?:\/\/[^/?#]/i.test(text) && URL.canParse(text);
}

const httpUrl = z.string().refine(isHttpUrl, 'must be an http:// or https:// URL');

const positiveInt = z.number().int().positive();

/**
 * Per model: a glob on the request's model (`*` any run, `?` one character) and the window in tokens; first match wins.
 * docs/windows.md.
 */
const windows = z
  .array(
    z
      .object({
        model: z.string().min(1),
        tokens: z.number().int().min(256).max(100_000_000),
        /** Whether the window holds the requested completion too (vLLM's does, Ollama's does not); true unless said. */
        completionCounted: z.boolean().optional(),
      })
      .strict(),
  )
  .max(1000);

const server = z
  .object({
    host: z.string().min(1).default(DEFAULTS.host),
    port: z.number().int().min(0).max(65535).default(DEFAULTS.port),
    bodyLimitBytes: positiveInt.default(DEFAULTS.bodyLimitBytes),
    shutdownGraceMs: z.number().int().min(0).default(DEFAULTS.shutdownGraceMs),
    requestTimeoutMs: z.number().int().min(0).default(DEFAULTS.requestTimeoutMs),
    headersTimeoutMs: z.number().int().min(0).default(DEFAULTS.headersTimeoutMs),
    keepAliveTimeoutMs: z.number().int().min(0).default(DEFAULTS.keepAliveTimeoutMs),
  })
  .strict();

const apiName = z.enum(APIS);

/** A forward proxy is an origin: a path, query or fragment after it is refused by undici's ProxyAgent. */
export function isProxyUrl(text: string): boolean {
  if (!isHttpUrl(text)) return false;
  const url = new URL(text);
  return url.pathname === '/' && url.search === '' && url.hash === '';
}

/** A forward proxy's URL, or `none`: straight to the upstream whatever HTTPS_PROXY says. */
const proxySetting = z
  .string()
  .refine((p) => p === 'none' || isProxyUrl(p), 'must be none, or a proxy URL with no path: http://host:port or https://host:port');

/** The default upstream, and what every named upstream takes unless it sets its own: timeouts, error-body bound, preamble hold, egress. */
const upstream = z
  .object({
    url: httpUrl.optional(),
    apiKey: z.string().min(1).optional(),
    connectTimeoutMs: positiveInt.default(DEFAULTS.connectTimeoutMs),
    firstByteTimeoutMs: positiveInt.default(DEFAULTS.firstByteTimeoutMs),
    idleTimeoutMs: positiveInt.default(DEFAULTS.idleTimeoutMs),
    errorBodyLimitBytes: positiveInt.default(DEFAULTS.errorBodyLimitBytes),
    preambleHoldMs: positiveInt.max(2_147_483_647).default(DEFAULTS.preambleHoldMs),
    proxy: proxySetting.optional(),
    /** PEM file of CA certificates trusted for the upstream, on top of Node's own. */
    caFile: z.string().min(1).optional(),
    /** The default upstream's known context windows (UPSTREAM_CONTEXT_WINDOW: one for every model). */
    windows: windows.optional(),
    /** Ask the upstream for its models' windows where it says them (Ollama, llama.cpp, vLLM, ...); every upstream unless it says otherwise. */
    discoverWindows: z.boolean().default(true),
  })
  .strict();

/** Where an upstream's compactions get their summaries, when not from the request's own upstream and model. */
const upstreamSummarizer = z
  .object({
    /** Another configured upstream (its URL and its own key). */
    upstream: z.string().min(1).optional(),
    url: httpUrl.optional(),
    api: apiName.optional(),
    model: z.string().min(1).optional(),
    apiKey: z.string().min(1).optional(),
  })
  .strict()
  .refine((s) => !(s.upstream && s.url), 'takes upstream or url, not both');

/** Upstream names are path prefixes (`/NAME/v1/...`) and metric labels: lowercase words. */
const UPSTREAM_NAME = /^[a-z][a-z0-9_-]{0,31}$/;

const namedUpstream = z
  .object({
    url: httpUrl,
    apiKey: z.string().min(1).optional(),
    /** The APIs it serves; all of them by default. */
    apis: z.array(apiName).min(1).optional(),
    connectTimeoutMs: positiveInt.optional(),
    firstByteTimeoutMs: positiveInt.optional(),
    idleTimeoutMs: positiveInt.optional(),
    proxy: proxySetting.optional(),
    caFile: z.string().min(1).optional(),
    summarizer: upstreamSummarizer.optional(),
    windows: windows.optional(),
    discoverWindows: z.boolean().optional(),
  })
  .strict();

const route = z
  .object({
    api: apiName.optional(),
    /** A glob on the request's model: `*` any run of characters, `?` one. */
    model: z.string().min(1).optional(),
    /** Where a request goes whose model could not be read (its body is not JSON, or has no top-level string `model`). */
    unknownModel: z.literal(true).optional(),
    upstream: z.string().min(1),
  })
  .strict()
  .refine(
    (r) => r.api !== undefined || r.model !== undefined || r.unknownModel,
    'needs api or model, or unknownModel (a route without any would match everything: that is defaultUpstream)',
  )
  .refine(
    (r) => !(r.model !== undefined && r.unknownModel),
    'has both model and unknownModel: a route matches a model it read, or one it could not read, not both',
  );

const auth = z
  .object({
    keys: z.array(z.string().min(1)).default([]),
    /** Serve without gateway keys on a non-loopback address while holding an upstream key: an open gateway, on purpose. */
    allowOpen: z.boolean().default(false),
    /** When set, /metrics answers only a request carrying this key (Bearer or x-api-key). */
    metricsKey: z.string().min(1).optional(),
    /** Model names in /metrics' `model` labels without metricsKey (a /metrics only a trusted network reaches); with it they are shown anyway. */
    metricsModelNames: z.boolean().default(false),
  })
  .strict();

const log = z
  .object({
    level: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
    // JSON lines for machines; `pretty` (pino-pretty) for a human at a terminal; `auto`: pretty when stdout is a terminal.
    format: z.enum(['auto', 'json', 'pretty']).default('auto'),
  })
  .strict();

const compaction = z
  .object({
    maxReplays: z.number().int().min(0).max(1).default(DEFAULTS.maxReplays),
    strategy: z.enum(['summarize', 'fallback']).default('summarize'),
    /** Mask old tool outputs before summarising: when that alone brings the request under its aim, no summarizer call. */
    mask: z.boolean().default(true),
    keepRecent: z.number().int().min(1).max(1000).default(DEFAULTS.keepRecent),
    summaryRole: z.enum(['user', 'system', 'developer', 'assistant']).default('user'),
    proactive: z.boolean().default(true),
    targetRatio: z.number().min(0.2).max(0.95).default(DEFAULTS.targetRatio),
    minCompletionTokens: z.number().int().min(1).default(DEFAULTS.minCompletionTokens),
    /** Bytes of request bodies under rescue at once, gateway-wide; by default a share of the heap limit. */
    rescueBudgetBytes: positiveInt.optional(),
    rescueWaitMs: z.number().int().min(0).default(DEFAULTS.rescueWaitMs),
    /** A refusal for length that could not be rescued goes to the client in its API's own overflow words, when the upstream's are not. */
    translateOverflow: z.boolean().default(true),
  })
  .strict();

const redisUrl = z.string().refine((u) => /^rediss?:\/\//i.test(u), 'must be a redis:// or rediss:// URL');

/** `host:port` of a Redis node or a Sentinel (`[::1]:6379` for IPv6). */
const redisAddress = z.string().regex(/^(\[[0-9A-Fa-f:.]+\]|[^\s:[\]/@]+):\d{1,5}$/, 'must be host:port');

/**
 * A Redis Cluster (seed nodes) or a Sentinel set, with credentials and TLS; without url, cluster or sentinels it adds those to
 * memory.redisUrl.
 */
const redisTarget = z
  .object({
    url: redisUrl.optional(),
    cluster: z.array(redisAddress).min(1).optional(),
    sentinels: z.array(redisAddress).min(1).optional(),
    /** The master's name the sentinels watch (`sentinel monitor NAME ...`). */
    name: z.string().min(1).optional(),
    db: z.number().int().min(0).optional(),
    username: z.string().min(1).optional(),
    password: z.string().min(1).optional(),
    sentinelUsername: z.string().min(1).optional(),
    sentinelPassword: z.string().min(1).optional(),
    tls: z.boolean().optional(),
    /** PEM file of the CA that signed Redis's certificates (TLS on). */
    caFile: z.string().min(1).optional(),
  })
  .strict()
  .superRefine((r, ctx) => {
    const targets = (['url', 'cluster', 'sentinels'] as const).filter((k) => r[k] !== undefined);
    if (targets.length > 1)
      ctx.addIssue({ code: 'custom', path: [], message: `takes one of url, cluster or sentinels; got ${targets.join(' and ')}` });
    if (r.sentinels && !r.name)
      ctx.addIssue({
        code: 'custom',
        path: ['name'],
        message: 'needs the name of the master the sentinels watch (sentinel monitor NAME ...)',
      });
    for (const key of ['name', 'sentinelUsername', 'sentinelPassword'] as const) {
      if (r[key] !== undefined && !r.sentinels)
        ctx.addIssue({ code: 'custom', path: [key], message: 'is for sentinels only', params: { said: true } });
    }
    if (r.db !== undefined && r.cluster) ctx.addIssue({ code: 'custom', path: ['db'], message: 'a Redis Cluster has database 0 only' });
  });

const memory = z
  .object({
    enabled: z.boolean().default(true),
    maxBytes: positiveInt.default(DEFAULTS.memoryMaxBytes),
    ttlSeconds: positiveInt.default(DEFAULTS.memoryTtlSeconds),
    /** Requests that carry no credential share one memory (a single-user sidecar); off by default. */
    shareAnonymous: z.boolean().default(false),
    /** Keys the hash of each tenant's credentials (an HMAC), which names its memory in Redis: docs/memory.md. */
    tenantSecret: z.string().min(16, 'must be at least 16 characters: a random secret, the same on every replica').optional(),
    redisUrl: redisUrl.optional(),
    /** A redis:// URL (as redisUrl), or a mapping: a cluster, sentinels, credentials, TLS. */
    redis: z.union([redisUrl, redisTarget], { error: 'must be a redis:// URL or a mapping with url, cluster or sentinels' }).optional(),
  })
  .strict()
  .superRefine((m, ctx) => {
    const target = typeof m.redis === 'string' || m.redis?.url || m.redis?.cluster || m.redis?.sentinels;
    if (target && m.redisUrl)
      ctx.addIssue({
        code: 'custom',
        path: ['redis'],
        message: 'says where Redis is, and so does memory.redisUrl: keep one',
        params: { said: true },
      });
    else if (m.redis && !target && !m.redisUrl)
      ctx.addIssue({
        code: 'custom',
        path: ['redis'],
        message: 'needs url, cluster or sentinels (or memory.redisUrl)',
        params: { said: true },
      });
  });

const summarizer = z
  .object({
    url: httpUrl.optional(),
    /** The summarizer's API; by default the API of the request being rescued. */
    api: apiName.optional(),
    model: z.string().min(1).optional(),
    apiKey: z.string().min(1).optional(),
    timeoutMs: positiveInt.default(DEFAULTS.summarizerTimeoutMs),
    maxInputTokens: z.number().int().min(1000).default(DEFAULTS.summarizerMaxInputTokens),
    maxSummaryTokens: z.number().int().min(100).default(DEFAULTS.summarizerMaxSummaryTokens),
    maxCalls: z.number().int().min(1).default(DEFAULTS.summarizerMaxCalls),
    maxInputBytes: positiveInt.default(DEFAULTS.summarizerMaxInputBytes),
    prompt: z.string().min(1).optional(),
    /**
     * Condense with the provider's own compaction where the upstream has it (OpenAI's `/responses/compact`), the summarizer as
     * fallback.
     */
    providerCompaction: z.boolean().default(false),
  })
  .strict();

/** Traces over OTLP/HTTP (docs/telemetry.md): off unless an endpoint is set. */
const telemetry = z
  .object({
    /** The OTLP/HTTP base URL (OTEL_EXPORTER_OTLP_ENDPOINT); traces go to its `/v1/traces`. */
    otlpEndpoint: httpUrl.optional(),
    /** The traces URL itself (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT), used as it is; wins over otlpEndpoint. */
    tracesEndpoint: httpUrl.optional(),
    /** `service.name` (OTEL_SERVICE_NAME); compaction-gateway by default. */
    serviceName: z.string().min(1).optional(),
  })
  .strict();

/** The status page and its JSON (docs/operations.md#the-status-page). */
const status = z
  .object({
    enabled: z.boolean().default(true),
    /**
     * What the gateway wrote in a conversation (summary, trail): only on a loopback gateway or with a gateway key; false never
     * keeps or shows it.
     */
    content: z.boolean().default(true),
  })
  .strict();

const configObject = z
  .object({
    server: server.default(() => server.parse({})),
    upstream: upstream.default(() => upstream.parse({})),
    auth: auth.default(() => auth.parse({})),
    log: log.default(() => log.parse({})),
    compaction: compaction.default(() => compaction.parse({})),
    summarizer: summarizer.default(() => summarizer.parse({})),
    memory: memory.default(() => memory.parse({})),
    telemetry: telemetry.default(() => telemetry.parse({})),
    status: status.default(() => status.parse({})),
    /** Named upstreams, each served under `/NAME/v1/...` and picked by `routes`. */
    upstreams: z.record(z.string(), namedUpstream).optional(),
    /** The upstream of a request no path prefix or route picks. */
    defaultUpstream: z.string().min(1).optional(),
    /** First match wins; then defaultUpstream. */
    routes: z.array(route).default([]),
  })
  .strict();

export const configSchema = configObject.superRefine((config, ctx) => {
  // With gateway keys, the client's Authorization carries a gateway key, which is never forwarded.
  if (config.auth.keys.length > 0 && !config.upstreams && !config.upstream.apiKey) {
    ctx.addIssue({
      code: 'custom',
      path: ['upstream', 'apiKey'],
      message: 'is required when auth.keys is set (the gateway key is not forwarded upstream)',
    });
  }
  // Each names the value it is about in its own words: the value is not shown again after it.
  for (const problem of upstreamProblems(config)) ctx.addIssue({ code: 'custom', ...problem, params: { said: true } });
});

/** Paths the gateway serves itself: an upstream of one of these names would be shadowed, or shadow them. */
const RESERVED_NAMES = new Set(['v1', 'v1beta', 'healthz', 'readyz', 'metrics']);

/** Names that refer to no upstream, and names that cannot be prefixes; each a problem at its key. */
function upstreamProblems(config: z.infer<typeof configObject>): Array<{ path: PropertyKey[]; message: string }> {
  const problems: Array<{ path: PropertyKey[]; message: string }> = [];
  const named = config.upstreams ?? {};
  const names = new Set(Object.keys(named));
  // upstream.url (UPSTREAM_URL) beside named upstreams is one more, named `default`.
  const implicit = config.upstreams !== undefined && (config.upstream.url !== undefined || config.upstream.apiKey !== undefined);
  if (implicit && names.has('default')) {
    problems.push({
      path: ['upstreams', 'default'],
      message:
        'two upstreams are named default (prefix /default): upstream.url (UPSTREAM_URL) defines one beside upstreams; drop one of them',
    });
  }
  if (implicit && config.upstream.url === undefined) {
    problems.push({
      path: ['upstream', 'apiKey'],
      message:
        'is set without upstream.url: beside upstreams it defines an upstream named default, which needs its url (or put the key on a named upstream)',
    });
  }
  if (implicit) names.add('default');
  // Without a URL of its own the summarizer is each request's upstream: one key for all of them would reach every provider.
  if (config.upstreams !== undefined && config.summarizer.apiKey !== undefined && config.summarizer.url === undefined) {
    problems.push({
      path: ['summarizer', 'apiKey'],
      message:
        "is set without summarizer.url beside upstreams: it would go to every upstream's summarizer calls; set summarizer.url (the key goes there only), or give the upstream that needs it its own summarizer.apiKey",
    });
  }
  for (const name of Object.keys(named)) {
    if (!UPSTREAM_NAME.test(name))
      problems.push({
        path: ['upstreams', name],
        message: 'an upstream name is a lowercase word (a-z, digits, - and _, at most 32): it is the path prefix /NAME and a metric label',
      });
    else if (RESERVED_NAMES.has(name))
      problems.push({
        path: ['upstreams', name],
        message: `the prefix /${name} would shadow the gateway's own /${name}: choose another name`,
      });
  }
  const known = [...names].sort().join(', ') || '(none)';
  const servesApi = (name: string, api: Api) => (name === 'default' && !named.default) || (named[name]?.apis ?? APIS).includes(api);
  if (config.upstreams !== undefined && names.size === 0)
    problems.push({ path: ['upstreams'], message: 'is empty: name at least one upstream, or leave it out and set upstream.url' });
  if (config.defaultUpstream !== undefined && !names.has(config.defaultUpstream)) {
    problems.push({
      path: ['defaultUpstream'],
      message: `names no upstream: ${JSON.stringify(config.defaultUpstream)}; the upstreams are ${known}`,
    });
  }
  if (config.defaultUpstream !== undefined && config.upstreams === undefined) {
    problems.push({
      path: ['defaultUpstream'],
      message: 'needs upstreams: with upstream.url alone there is one upstream, and every request goes to it',
    });
  }
  config.routes.forEach((r, i) => {
    if (config.upstreams === undefined)
      problems.push({ path: ['routes', i], message: 'needs upstreams: with upstream.url alone there is one upstream to route to' });
    else if (!names.has(r.upstream))
      problems.push({
        path: ['routes', i, 'upstream'],
        message: `names no upstream: ${JSON.stringify(r.upstream)}; the upstreams are ${known}`,
      });
    else if (r.api !== undefined && !servesApi(r.upstream, r.api)) {
      problems.push({
        path: ['routes', i],
        message: `routes the ${r.api} API to ${r.upstream}, which does not serve it (its apis: ${named[r.upstream].apis!.join(', ')})`,
      });
    }
  });
  problems.push(...sharedOriginProblems(config, implicit));
  for (const [name, u] of Object.entries(named)) {
    const other = u.summarizer?.upstream;
    if (other !== undefined && !names.has(other))
      problems.push({
        path: ['upstreams', name, 'summarizer', 'upstream'],
        message: `names no upstream: ${JSON.stringify(other)}; the upstreams are ${known}`,
      });
    else if (other !== undefined && u.summarizer?.api !== undefined && !servesApi(other, u.summarizer.api)) {
      problems.push({
        path: ['upstreams', name, 'summarizer', 'api'],
        message: `is ${u.summarizer.api}, which ${other} does not serve (its apis: ${named[other].apis!.join(', ')})`,
      });
    }
  }
  return problems;
}

export type Config = z.infer<typeof configSchema>;
export type ConfigInput = z.input<typeof configSchema>;

/** Upstreams on one origin share its connection pool, so they must agree on how it connects. */
function sharedOriginProblems(config: z.infer<typeof configObject>, implicit: boolean): Array<{ path: PropertyKey[]; message: string }> {
  const shared = config.upstream;
  const entries: Array<[name: string, url: string, egress: Record<string, unknown>]> = [];
  if (implicit && shared.url) entries.push(['default', shared.url, {}]);
  for (const [name, u] of Object.entries(config.upstreams ?? {})) entries.push([name, u.url, u]);
  const first = new Map<string, { name: string; egress: string }>();
  const problems: Array<{ path: PropertyKey[]; message: string }> = [];
  for (const [name, url, u] of entries) {
    const keys = ['proxy', 'caFile', 'connectTimeoutMs', 'firstByteTimeoutMs', 'idleTimeoutMs'] as const;
    const egress = JSON.stringify(keys.map((k) => u[k] ?? shared[k]));
    // A URL that is not one is a problem at its own key already.
    if (!isHttpUrl(url)) continue;
    const origin = new URL(url).origin;
    const seen = first.get(origin);
    if (!seen) first.set(origin, { name, egress });
    else if (seen.egress !== egress) {
      problems.push({
        path: name === 'default' ? ['upstream'] : ['upstreams', name],
        message: `shares the origin ${origin} with ${seen.name} but not its ${keys.join(', ')}: the gateway keeps one connection pool per origin; give them the same`,
      });
    }
  }
  return problems;
}
