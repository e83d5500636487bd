import { readFileSync } from 'node:fs';
import type { ConnectionOptions } from 'node:tls';
import { Cluster, Redis, type ClusterOptions, type RedisOptions } from 'ioredis';
import type { RedisTarget } from './redis-target.js';
import { describeRedisError } from './redis-wording.js';

const COMMAND_TIMEOUT_MS = 500;
const CONNECT_TIMEOUT_MS = 1_000;
/** Forever: Redis comes back, or a replica is promoted. */
const reconnectDelay = (attempt: number) => Math.min(attempt * 200, 2_000);

export type RedisClient = Redis | Cluster;

/** No offline queue for `store`: a request never waits for Redis to come back. */
export function connectRedis(target: RedisTarget, use: 'store' | 'probe', connectTimeoutMs = CONNECT_TIMEOUT_MS): RedisClient {
  const retry = use === 'store' ? reconnectDelay : () => null;
  const tls = tlsOf(target);
  const node: RedisOptions = {
    ...(target.username ? { username: target.username } : {}),
    ...(target.password ? { password: target.password } : {}),
    ...(tls ? { tls } : {}),
    connectionName: use === 'store' ? 'compaction-gateway' : 'compaction-gateway-probe',
    connectTimeout: connectTimeoutMs,
    commandTimeout: COMMAND_TIMEOUT_MS,
    maxRetriesPerRequest: 0,
    // A master demoted under a live connection refuses writes: reconnect to find the new one.
    reconnectOnError: (err) => /^READONLY/.test(err.message),
    lazyConnect: use === 'probe',
  };
  if (target.kind === 'cluster') {
    const options: ClusterOptions = {
      enableOfflineQueue: false,
      clusterRetryStrategy: retry,
      maxRedirections: 4,
      retryDelayOnFailover: 100,
      retryDelayOnClusterDown: 100,
      retryDelayOnTryAgain: 100,
      slotsRefreshTimeout: connectTimeoutMs,
      lazyConnect: use === 'probe',
      redisOptions: node,
    };
    return new Cluster(target.nodes, options);
  }
  const common: RedisOptions = { ...node, enableOfflineQueue: false, retryStrategy: retry };
  if (target.kind === 'node') return new Redis(target.url, common);
  return new Redis({
    ...common,
    sentinels: target.sentinels,
    name: target.name,
    ...(target.db !== undefined ? { db: target.db } : {}),
    ...(target.sentinelUsername ? { sentinelUsername: target.sentinelUsername } : {}),
    ...(target.sentinelPassword ? { sentinelPassword: target.sentinelPassword } : {}),
    ...(tls ? { sentinelTLS: tls, enableTLSForSentinelMode: true } : {}),
    sentinelCommandTimeout: COMMAND_TIMEOUT_MS,
    sentinelRetryStrategy: retry,
    // Not ioredis's failoverDetector: its disconnect on +switch-master, while still reconnecting to a
    // dead master, ends the client for good (ioredis 5.11). Dead or demoted masters reconnect anyway.
  });
}

function tlsOf(target: RedisTarget): ConnectionOptions | undefined {
  if (!target.tls) return undefined;
  return target.caFile ? { ca: readFileSync(target.caFile) } : {};
}

const REDIS_PROBE_MS = 1_000;

/** Null when Redis answers a PING in time. The gateway starts either way: memory is an optimisation. */
export async function probeRedis(target: string | RedisTarget, timeoutMs = REDIS_PROBE_MS): Promise<string | null> {
  const redis = connectRedis(
    typeof target === 'string' ? { kind: 'node', url: target, tls: /^rediss:/i.test(target) } : target,
    'probe',
    timeoutMs,
  );
  let firstError: Error | undefined;
  redis.on('error', (err: Error) => (firstError ??= err));
  // A sentinel that answers, but names no master by that name, says so only here.
  redis.on('sentinelError', (err: Error) => {
    if (/successfully, but got an invalid reply/.test(err.message)) firstError = err;
  });
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
