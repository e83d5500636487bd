import { readFileSync } from 'node:fs';
import type { ConnectionOptions } from 'node:tls';
import { Cluster, Redis, type ClusterOptions, type RedisOptions } from 'ioredis';
import type { RedisTarget } from './redis-target.js';
import { describeRedisError } from './redis-wording.js';

/** One command's answer comes within this, or the command failed. */
const COMMAND_TIMEOUT_MS = 500;
const CONNECT_TIMEOUT_MS = 1_000;
/** Reconnecting, forever, at most this far apart: Redis comes back, or a replica is promoted. */
const reconnectDelay = (attempt: number) => Math.min(attempt * 200, 2_000);

export type RedisClient = Redis | Cluster;

/**
 * A client for the target. `store`: commands fail at once while it is not connected (no offline
 * queue: a request never waits for Redis to come back) and it reconnects by itself; `probe`:
 * one try, for the startup check.
 */
export function connectRedis(target: RedisTarget, use: 'store' | 'probe', connectTimeoutMs = CONNECT_TIMEOUT_MS): RedisClient {
  const retry = use === 'store' ? reconnectDelay : () => null;
  const tls = tlsOf(target);
  const node: RedisOptions = {
    ...(target.username ? { username: target.username } : {}),
    ...(target.password ? { password: target.password } : {}),
    ...(tls ? { tls } : {}),
    // Shown by CLIENT LIST: an operator tells the gateway's connections apart.
    connectionName: use === 'store' ? 'compaction-gateway' : 'compaction-gateway-probe',
    connectTimeout: connectTimeoutMs,
    commandTimeout: COMMAND_TIMEOUT_MS,
    maxRetriesPerRequest: 0,
    // A master that became a replica (a failover seen from a connection that stayed up) refuses
    // writes: reconnect, and Sentinel or the Cluster's slots say where the master is now.
    reconnectOnError: (err) => /^READONLY/.test(err.message),
    lazyConnect: use === 'probe',
  };
  if (target.kind === 'cluster') {
    const options: ClusterOptions = {
      enableOfflineQueue: false,
      clusterRetryStrategy: retry,
      // A command to a node that is gone is tried again on what the refreshed slots say, a few
      // times at most: the operation's bound stops it anyway.
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
    // Not ioredis's failoverDetector: its disconnect on +switch-master, while the client is still
    // reconnecting to a master that died, ends the client for good (ioredis 5.11). A dead master
    // closes the connection, and a demoted one answers READONLY: either way it reconnects.
  });
}

function tlsOf(target: RedisTarget): ConnectionOptions | undefined {
  if (!target.tls) return undefined;
  // Read once, at start: load.ts checked the file is there and holds a certificate.
  return target.caFile ? { ca: readFileSync(target.caFile) } : {};
}

const REDIS_PROBE_MS = 1_000;

/**
 * Whether Redis answers a PING within a second: null when it does, else what went wrong in
 * plain words. `target`: a URL, or memory.redis as a whole (a cluster: its slots are read; a
 * Sentinel set: the master it names). The gateway starts either way (memory is an
 * optimisation, and reconnects).
 */
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
