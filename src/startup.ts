import { BlockList, isIP } from 'node:net';
import { Redis } from 'ioredis';
import type { Config } from './config/schema.js';

/**
 * What an operator needs to read from the first lines of the log: which config is in force,
 * where requests go, and what will not work as they might expect. Never a credential.
 */
export function startupFields(config: Readonly<Config>, source: string | undefined, versions: { gateway: string; node: string }) {
  const { summarizer, memory } = config;
  return {
    config: source ?? 'defaults (no config file)',
    upstream: loggableUrl(config.upstream.url),
    upstreamKey: config.upstream.apiKey ? 'the gateway\'s own (upstream.apiKey)' : "the client's",
    auth: config.auth.keys.length > 0 ? `on (${config.auth.keys.length} gateway key${config.auth.keys.length > 1 ? 's' : ''})` : 'off',
    compaction: config.compaction.maxReplays === 0 ? 'off (maxReplays 0)' : config.compaction.strategy,
    summarizer:
      config.compaction.strategy === 'fallback'
        ? 'none (strategy fallback)'
        : `${summarizer.url ? loggableUrl(summarizer.url) : "the request's own upstream"}, ${summarizer.model ? `model ${summarizer.model}` : "the request's model"}`,
    memory: !memory.enabled ? 'off' : memory.redisUrl ? `redis ${loggableRedisUrl(memory.redisUrl)}` : 'local (in-process)',
    proactive: config.compaction.proactive,
    version: versions.gateway,
    node: versions.node,
  };
}

/**
 * Why the gateway will not start with this config, or undefined. Holding the provider key with
 * no gateway key on an address beyond loopback would hand that key to anyone who reaches the
 * port (the image binds 0.0.0.0): that takes `auth.allowOpen`, said on purpose.
 */
export function openGatewayRefusal(config: Readonly<Config>): string | undefined {
  if (!isOpenGateway(config) || config.auth.allowOpen) return undefined;
  const { host } = config.server;
  return [
    `refusing to start an open gateway: it holds the provider key (upstream.apiKey, UPSTREAM_API_KEY), asks clients for no key ` +
      `(auth.keys, GATEWAY_API_KEYS, is empty) and listens on ${host} (server.host, HOST), beyond loopback: ` +
      `anyone who reaches ${portOf(config)} could spend the provider key. Do one of:`,
    '  - set GATEWAY_API_KEYS to one or more comma-separated keys (auth.keys); clients present one as their Bearer token, x-api-key or x-goog-api-key',
    '  - listen on loopback only: HOST=127.0.0.1 (server.host)',
    '  - serve it open on purpose (a private network, an authenticating proxy in front): GATEWAY_ALLOW_OPEN=1 (auth.allowOpen: true)',
  ].join('\n');
}

const portOf = (config: Readonly<Config>) => (config.server.port === 0 ? 'its port' : `port ${config.server.port}`);

/** The provider key, no gateway key, and an address beyond loopback. */
function isOpenGateway(config: Readonly<Config>): boolean {
  return Boolean(config.upstream.apiKey) && config.auth.keys.length === 0 && !isLoopback(config.server.host);
}

const LOOPBACK = new BlockList();
LOOPBACK.addSubnet('127.0.0.0', 8, 'ipv4');
LOOPBACK.addAddress('::1', 'ipv6');

/** 127.0.0.0/8 (IPv4-mapped too), ::1 or localhost. A host name is not resolved here: only `localhost` counts. */
export function isLoopback(host: string): boolean {
  const bare = host.replace(/^\[(.*)\]$/, '$1');
  if (bare.toLowerCase() === 'localhost') return true;
  const family = isIP(bare);
  return family !== 0 && LOOPBACK.check(bare, family === 4 ? 'ipv4' : 'ipv6');
}

/** Settings that start fine but will probably not do what was meant, each as a sentence. */
export function startupWarnings(config: Readonly<Config>): string[] {
  const warnings: string[] = [];
  if (isOpenGateway(config) && config.auth.allowOpen) {
    warnings.push(
      `open gateway: anyone who reaches ${portOf(config)} on ${config.server.host} is served with the provider key (upstream.apiKey), ` +
        'without a gateway key, because auth.allowOpen (GATEWAY_ALLOW_OPEN) is set. Set GATEWAY_API_KEYS to require one.',
    );
  }
  for (const [key, url] of [['upstream.url', config.upstream.url], ['summarizer.url', config.summarizer.url]] as const) {
    if (url && new URL(url).pathname.replace(/\/+$/, '') === '') {
      warnings.push(
        `${key} ${loggableUrl(url)} has no version path: requests will go to ${loggableUrl(url).replace(/\/+$/, '')}/chat/completions. ` +
          'Most providers need the /v1 (or their own version path) in the base URL; the Gemini API\'s is its origin, for Gemini clients.',
      );
    }
  }
  return warnings;
}

const REDIS_PROBE_MS = 1_000;

/**
 * Whether Redis answers a PING within a second: null when it does, else what went wrong in
 * plain words. The gateway starts either way (memory is an optimisation, and reconnects).
 */
export async function probeRedis(url: string, timeoutMs = REDIS_PROBE_MS): Promise<string | null> {
  const redis = new Redis(url, {
    lazyConnect: true,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    connectTimeout: timeoutMs,
    retryStrategy: () => null,
  });
  let firstError: Error | undefined;
  redis.on('error', (err: Error) => (firstError ??= err));
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(Object.assign(new Error('timeout'), { code: 'ETIMEDOUT' })), timeoutMs);
  });
  try {
    await Promise.race([redis.connect().then(() => redis.ping()), deadline]);
    return null;
  } catch (err) {
    return describeRedisError(firstError ?? (err as Error), timeoutMs);
  } finally {
    clearTimeout(timer);
    redis.disconnect();
  }
}

/** What a Redis client error means, in plain words (for the startup WARN, and any other Redis warning). */
export function describeRedisError(err: Error & { code?: string }, timeoutMs = REDIS_PROBE_MS): string {
  const text = `${err.code ?? ''} ${err.message}`;
  if (/ECONNREFUSED/.test(text)) return 'connection refused: nothing listens at that address';
  if (/ENOTFOUND|EAI_AGAIN/.test(text)) return 'its host name does not resolve';
  if (/ETIMEDOUT|timeout/i.test(text)) return `no answer within ${timeoutMs} ms`;
  if (/NOAUTH|WRONGPASS|invalid password|AUTH/i.test(text)) return 'it refused the credentials in the URL';
  if (/ECONNRESET|EPIPE|closed/i.test(text)) return 'it closed the connection (is it Redis, and is TLS right: redis:// vs rediss://?)';
  return err.message.split('\n')[0].slice(0, 120);
}

/** A URL without what may hold a secret: userinfo (`https://user:key@host`) and the query (`?api-key=`). */
export function loggableUrl(url: string): string {
  const parsed = new URL(url);
  return `${parsed.origin}${parsed.pathname}`;
}

/** A Redis URL with its password masked (`redis://user:***@host:6379/0`). */
export function loggableRedisUrl(url: string): string {
  const parsed = new URL(url);
  const user = parsed.username || parsed.password ? `${parsed.username}${parsed.password ? ':***' : ''}@` : '';
  return `${parsed.protocol}//${user}${parsed.host}${parsed.pathname === '/' ? '' : parsed.pathname}`;
}
