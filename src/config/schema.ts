import { z } from 'zod';

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

const httpUrl = z
  .string()
  .url()
  .refine((u) => /^https?:\/\//i.test(u), 'must be an http:// or https:// URL');

const positiveInt = z.number().int().positive();

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

const upstream = z
  .object({
    url: httpUrl.default(DEFAULTS.upstreamUrl),
    apiKey: z.string().min(1).optional(),
    connectTimeoutMs: positiveInt.default(DEFAULTS.connectTimeoutMs),
    firstByteTimeoutMs: positiveInt.default(DEFAULTS.firstByteTimeoutMs),
    idleTimeoutMs: positiveInt.default(DEFAULTS.idleTimeoutMs),
    errorBodyLimitBytes: positiveInt.default(DEFAULTS.errorBodyLimitBytes),
    preambleHoldMs: positiveInt.max(2_147_483_647).default(DEFAULTS.preambleHoldMs),
  })
  .strict();

const auth = z
  .object({
    keys: z.array(z.string().min(1)).default([]),
    /** Serve without gateway keys on a non-loopback address while holding an upstream key: an open gateway, on purpose. */
    allowOpen: z.boolean().default(false),
    /** When set, /metrics answers only a request carrying this key (Bearer or x-api-key). */
    metricsKey: z.string().min(1).optional(),
  })
  .strict();

const log = z
  .object({
    level: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
    // JSON lines for machines; `pretty` (pino-pretty) for a human at a terminal.
    format: z.enum(['json', 'pretty']).default('json'),
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
  })
  .strict();

const memory = z
  .object({
    enabled: z.boolean().default(true),
    maxBytes: positiveInt.default(DEFAULTS.memoryMaxBytes),
    ttlSeconds: positiveInt.default(DEFAULTS.memoryTtlSeconds),
    /** Requests that carry no credential share one memory (a single-user sidecar); off by default. */
    shareAnonymous: z.boolean().default(false),
    redisUrl: z
      .string()
      .refine((u) => /^rediss?:\/\//i.test(u), 'must be a redis:// or rediss:// URL')
      .optional(),
  })
  .strict();

const summarizer = z
  .object({
    url: httpUrl.optional(),
    /** The summarizer's API; by default the API of the request being rescued. */
    api: z.enum(['chat', 'responses', 'messages', 'gemini']).optional(),
    model: z.string().min(1).optional(),
    apiKey: z.string().min(1).optional(),
    timeoutMs: positiveInt.default(DEFAULTS.summarizerTimeoutMs),
    maxInputTokens: z.number().int().min(1000).default(DEFAULTS.summarizerMaxInputTokens),
    maxSummaryTokens: z.number().int().min(100).default(DEFAULTS.summarizerMaxSummaryTokens),
    maxCalls: z.number().int().min(1).default(DEFAULTS.summarizerMaxCalls),
    maxInputBytes: positiveInt.default(DEFAULTS.summarizerMaxInputBytes),
    prompt: z.string().min(1).optional(),
    /**
     * Condense with the provider's own compaction where the upstream has it (OpenAI's
     * `/responses/compact`), the summarizer as the fallback. Off by default.
     */
    providerCompaction: z.boolean().default(false),
  })
  .strict();

export const configSchema = z
  .object({
    server: server.default(() => server.parse({})),
    upstream: upstream.default(() => upstream.parse({})),
    auth: auth.default(() => auth.parse({})),
    log: log.default(() => log.parse({})),
    compaction: compaction.default(() => compaction.parse({})),
    summarizer: summarizer.default(() => summarizer.parse({})),
    memory: memory.default(() => memory.parse({})),
  })
  .strict()
  .superRefine((config, ctx) => {
    // With gateway keys, the client's Authorization carries a gateway key, which is never forwarded.
    if (config.auth.keys.length > 0 && !config.upstream.apiKey) {
      ctx.addIssue({
        code: 'custom',
        path: ['upstream', 'apiKey'],
        message: 'is required when auth.keys is set (the gateway key is not forwarded upstream)',
      });
    }
  });

export type Config = z.infer<typeof configSchema>;
/** What a caller may pass: every key optional, as in a config file. */
export type ConfigInput = z.input<typeof configSchema>;
