import { readFileSync } from 'node:fs';
import type { ConnectionOptions } from 'node:tls';
import { Cluster, Redis, type ClusterOptions, type RedisOptions } from 'ioredis';
import type { Config } from '../config/schema.js';
import { mergedLimit, type LearnedLimit } from './limits.js';
import { withEntry, type MemoryEntry, type MemoryStore, type Reach } from './store.js';

/*
 * Every line of Redis in the gateway: where it is (one node, a Cluster, a Sentinel set), how a
 * client connects to it, and the store that keeps the compaction memory there. Each command is
 * bounded (a failure is a miss: CompactionMemory.guard), so a request never waits on Redis for
 * longer than OPERATION_TIMEOUT_MS, whatever Redis is doing: down, failing over, resharding.
 */

/** Where Redis is, as config says it (memory.redis, memory.redisUrl), in one shape. */
export type RedisTarget =
  | ({ kind: 'node'; url: string } & RedisAuth)
  | ({ kind: 'cluster'; nodes: Address[] } & RedisAuth)
  | ({
      kind: 'sentinel';
      sentinels: Address[];
      name: string;
      db?: number;
      sentinelUsername?: string;
      sentinelPassword?: string;
    } & RedisAuth);

interface RedisAuth {
  username?: string;
  password?: string;
  /** TLS on (rediss:// says so for a URL); caFile: the CA to trust besides Node's own. */
  tls: boolean;
  caFile?: string;
}

interface Address {
  host: string;
  port: number;
}

/** The Redis the memory uses, or undefined: in-process memory. */
export function redisTargetOf(memory: Readonly<Config['memory']>): RedisTarget | undefined {
  const given = typeof memory.redis === 'string' ? { url: memory.redis } : (memory.redis ?? {});
  const url = given.url ?? memory.redisUrl;
  const auth: RedisAuth = {
    ...(given.username ? { username: given.username } : {}),
    ...(given.password ? { password: given.password } : {}),
    tls: given.tls ?? (given.caFile !== undefined || (url !== undefined && /^rediss:/i.test(url))),
    ...(given.caFile ? { caFile: given.caFile } : {}),
  };
  if (given.cluster) return { kind: 'cluster', nodes: given.cluster.map(addressOf), ...auth };
  if (given.sentinels && given.name) {
    const sentinelAuth = {
      ...(given.sentinelUsername ? { sentinelUsername: given.sentinelUsername } : {}),
      ...(given.sentinelPassword ? { sentinelPassword: given.sentinelPassword } : {}),
    };
    return {
      kind: 'sentinel',
      sentinels: given.sentinels.map(addressOf),
      name: given.name,
      ...(given.db !== undefined ? { db: given.db } : {}),
      ...sentinelAuth,
      ...auth,
    };
  }
  return url ? { kind: 'node', url, ...auth } : undefined;
}

/** `host:port`, `[v6]:port`. */
function addressOf(text: string): Address {
  const at = text.lastIndexOf(':');
  return { host: text.slice(0, at).replace(/^\[(.*)\]$/, '$1'), port: Number(text.slice(at + 1)) };
}

/** The target as the ready line says it, with no secret: `redis cluster 10.0.0.1:6379, ...`. */
export function describeRedisTarget(target: RedisTarget): string {
  const tls = target.tls && !(target.kind === 'node' && /^rediss:/i.test(target.url)) ? ', TLS' : '';
  const list = (addresses: Address[]) =>
    addresses.map((a) => (a.host.includes(':') ? `[${a.host}]:${a.port}` : `${a.host}:${a.port}`)).join(', ');
  switch (target.kind) {
    case 'node':
      return `redis ${loggableRedisUrl(target.url)}${tls}`;
    case 'cluster':
      return `redis cluster ${list(target.nodes)}${tls}`;
    case 'sentinel':
      return `redis sentinel master ${target.name} via ${list(target.sentinels)}${tls}`;
  }
}

/** A Redis URL with its password masked (`redis://user:***@host:6379/0`). */
function loggableRedisUrl(url: string): string {
  const parsed = new URL(url);
  const user = parsed.username || parsed.password ? `${parsed.username}${parsed.password ? ':***' : ''}@` : '';
  return `${parsed.protocol}//${user}${parsed.host}${parsed.pathname === '/' ? '' : parsed.pathname}`;
}

/** One command's answer comes within this, or the command failed. */
const COMMAND_TIMEOUT_MS = 500;
/**
 * A whole operation, within this: a Cluster retries a command on another node while slots move
 * (MOVED, TRYAGAIN, a node gone), and each try has its own command timeout.
 */
const OPERATION_TIMEOUT_MS = 1_000;
const CONNECT_TIMEOUT_MS = 1_000;
/** Reconnecting, forever, at most this far apart: Redis comes back, or a replica is promoted. */
const reconnectDelay = (attempt: number) => Math.min(attempt * 200, 2_000);

export type RedisClient = Redis | Cluster;

/**
 * A client for the target. `store`: commands fail at once while it is not connected (no offline
 * queue: a request never waits for Redis to come back) and it reconnects by itself; `probe`:
 * one try, for the startup check.
 */
function connectRedis(target: RedisTarget, use: 'store' | 'probe', connectTimeoutMs = CONNECT_TIMEOUT_MS): RedisClient {
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

/** `promise`, or a rejection after `ms`: no operation outlasts its bound, whatever the client does. */
function within<T>(promise: Promise<T>, ms = OPERATION_TIMEOUT_MS): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(Object.assign(new Error(`no answer from Redis within ${ms} ms`), { code: 'ETIMEDOUT' })), ms);
  });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

/*
 * Leases: one compaction of a conversation at a time, across every replica (CompactionMemory.lease).
 * A lease is a key holding its holder's random token, set with NX and an expiry. Only the holder
 * renews or frees it, and only while it is the holder's (compare, then act, in one script), and
 * its write of the conversation's entries checks the same way: a replica whose lease expired, or
 * was lost in a failover and taken by another, writes nothing. Both keys are in one cluster slot.
 */
const RENEW = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end return 0`;
const RELEASE = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`;
const FENCED_SET = `if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('SET', KEYS[2], ARGV[2], 'EX', ARGV[3]) return 1 end return 0`;

/**
 * A tenant's reach (store.ts Reach) is `EXTENDING DISPROVING` under its tenant key, each lowered
 * in one script so that two replicas' marks keep the smaller of each; NONE stands for no size. A
 * replica of the version before marks '1': that reaches every request, until the key expires.
 */
const NONE = 1e12;
const MARK_TENANT = `local e, d = tonumber(ARGV[1]), tonumber(ARGV[2])
local was = redis.call('GET', KEYS[1])
if was then
  local a, b = string.match(was, '^(%d+) (%d+)$')
  if a then e = math.min(e, tonumber(a)) d = math.min(d, tonumber(b)) else e = 0 d = 0 end
end
redis.call('SET', KEYS[1], string.format('%d %d', e, d), 'EX', ARGV[3])
return 1`;

/** How often a replica waiting for another's lease asks whether it is free. */
const LEASE_POLL_MS = 100;

/**
 * Shared by every replica pointed at the same Redis: one node, a Cluster or a Sentinel set.
 * Commands fail at once while Redis is down or moving (no offline queue) and each operation is
 * bounded, so a request never waits on it; the caller treats a failure as a miss.
 *
 * Keys, each a single-slot key: `PREFIX s:SESSION` (a conversation's entries), `PREFIX l:KEY`
 * (learned limits), `PREFIX t:TENANT` (a tenant has memory, and its reach: MARK_TENANT), and a conversation's lease
 * `{PREFIX s:SESSION}:lease`, whose hash tag is its entries key, so the fenced write of the two is
 * in one slot. The entries, limits and tenant keys are those of v5, unchanged: a replica of the
 * version before shares memory with this one during a rolling update (it takes no lease, and asks
 * only whether a tenant key exists).
 */
export class RedisStore implements MemoryStore {
  readonly shared = true;
  private readonly redis: RedisClient;

  constructor(
    target: RedisTarget,
    private readonly ttlSeconds: number,
    // v5: sessions are keyed by model too, and learned limits by tenant, upstream and model (a
    // hash), with the size of the request that stated each; a v4 replica would share one tenant's
    // lesson with every other. (v4: entries may be masked spans and carry a trail.)
    private readonly prefix = 'compaction-gateway:v5:',
  ) {
    this.redis = connectRedis(target, 'store');
    // Errors surface through the failing commands; this keeps ioredis from printing them.
    this.redis.on('error', () => {});
    if (this.redis instanceof Cluster) this.redis.on('node error', () => {});
  }

  /** The keys of a conversation (exported for the tests that look into Redis). */
  keysOf(session: string): { entries: string; lease: string } {
    const entries = `${this.prefix}s:${session}`;
    return { entries, lease: `{${entries}}:lease` };
  }

  async entries(session: string): Promise<MemoryEntry[]> {
    const text = await within(this.redis.get(this.keysOf(session).entries));
    return text ? (JSON.parse(text) as MemoryEntry[]) : [];
  }

  async remember(session: string, entry: MemoryEntry, lease?: string): Promise<boolean> {
    const keys = this.keysOf(session);
    const text = JSON.stringify(withEntry(await this.entries(session), entry));
    if (lease === undefined) {
      await within(this.redis.set(keys.entries, text, 'EX', this.ttlSeconds));
      return true;
    }
    return (await within(this.redis.eval(FENCED_SET, 2, keys.lease, keys.entries, lease, text, this.ttlSeconds))) === 1;
  }

  async limit(key: string): Promise<LearnedLimit | undefined> {
    const text = await within(this.redis.get(`${this.prefix}l:${key}`));
    return text ? (JSON.parse(text) as LearnedLimit) : undefined;
  }

  async recall(session: string | null, limitKey: string | null): Promise<{ entries: MemoryEntry[]; limit?: LearnedLimit }> {
    const entriesKey = session === null ? null : this.keysOf(session).entries;
    const keys = [entriesKey, limitKey === null ? null : `${this.prefix}l:${limitKey}`].filter((k) => k !== null);
    if (keys.length === 0) return { entries: [] };
    // A Cluster answers MGET only for keys of one slot: there, the reads go out together instead.
    const texts = await within(this.redis instanceof Cluster ? Promise.all(keys.map((k) => this.redis.get(k))) : this.redis.mget(keys));
    const entries = entriesKey === null ? null : texts[0];
    const limit = limitKey === null ? null : texts.at(-1);
    return {
      entries: entries ? (JSON.parse(entries) as MemoryEntry[]) : [],
      ...(limit ? { limit: JSON.parse(limit) as LearnedLimit } : {}),
    };
  }

  async learn(key: string, limit: LearnedLimit): Promise<LearnedLimit> {
    const merged = mergedLimit(await this.limit(key), limit);
    await this.replaceLimit(key, merged);
    return merged;
  }

  async replaceLimit(key: string, limit: LearnedLimit): Promise<void> {
    if (Object.keys(limit).length === 0) await within(this.redis.del(`${this.prefix}l:${key}`));
    else await within(this.redis.set(`${this.prefix}l:${key}`, JSON.stringify(limit), 'EX', this.ttlSeconds));
  }

  async markTenant(tenant: string, reach: Partial<Reach>): Promise<void> {
    const size = (n: number | undefined) => String(Math.min(n ?? NONE, NONE));
    await within(
      this.redis.eval(MARK_TENANT, 1, `${this.prefix}t:${tenant}`, size(reach.extending), size(reach.disproving), this.ttlSeconds),
    );
  }

  async reachOf(tenant: string): Promise<Reach | undefined> {
    const text = await within(this.redis.get(`${this.prefix}t:${tenant}`));
    if (text === null) return undefined;
    const sizes = /^(\d+) (\d+)$/.exec(text);
    if (!sizes) return { extending: 0, disproving: 0 };
    const size = (n: string) => (Number(n) >= NONE ? Infinity : Number(n));
    return { extending: size(sizes[1]), disproving: size(sizes[2]) };
  }

  /** Another replica may have remembered any tenant: always ask Redis. */
  mayHaveTenants(): boolean {
    return true;
  }

  async acquire(session: string, lease: string, ttlMs: number): Promise<boolean> {
    return (await within(this.redis.set(this.keysOf(session).lease, lease, 'PX', ttlMs, 'NX'))) === 'OK';
  }

  async renew(session: string, lease: string, ttlMs: number): Promise<boolean> {
    return (await within(this.redis.eval(RENEW, 1, this.keysOf(session).lease, lease, ttlMs))) === 1;
  }

  async release(session: string, lease: string): Promise<void> {
    await within(this.redis.eval(RELEASE, 1, this.keysOf(session).lease, lease));
  }

  /**
   * Asks every LEASE_POLL_MS: a wait happens only when two replicas compact one conversation at
   * once, and costs at most ms / LEASE_POLL_MS small reads. Pub/sub would need a subscriber
   * connection per replica (per node, in a cluster) and could miss its message in a failover, so
   * it would need this poll behind it anyway.
   */
  async whenFree(session: string, ms: number, signal?: AbortSignal): Promise<void> {
    const until = performance.now() + ms;
    const key = this.keysOf(session).lease;
    while (!signal?.aborted && performance.now() < until) {
      if ((await within(this.redis.exists(key))) === 0) return;
      await new Promise((resolve) => setTimeout(resolve, Math.max(1, Math.min(LEASE_POLL_MS, until - performance.now()))));
    }
  }

  async close(): Promise<void> {
    this.redis.disconnect();
  }
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

/** The Redis the memory uses, for main's probe at start: undefined with memory off or in-process. */
export function memoryRedis(config: Readonly<Config>): RedisTarget | undefined {
  return config.memory.enabled ? redisTargetOf(config.memory) : undefined;
}

/** The startup WARN for a Redis the probe did not reach: its address (no secret) and the sentence. */
export function redisUnreachable(target: RedisTarget, problem: string): { redis: string; message: string } {
  const redis = describeRedisTarget(target).replace(/^redis /, '');
  const what =
    target.kind === 'node'
      ? `Redis at ${redis}`
      : target.kind === 'cluster'
        ? `The Redis Cluster at ${redis.replace(/^cluster /, '')}`
        : `Redis (${redis})`;
  return {
    redis,
    message: `${what} is not reachable (${problem}). The gateway serves requests without compaction memory until Redis answers, then uses it again by itself.`,
  };
}

/** What a Redis client error means, in plain words (for the startup WARN, and any other Redis warning). */
function describeRedisError(err: Error & { code?: string }, timeoutMs = REDIS_PROBE_MS): string {
  const text = `${err.code ?? ''} ${err.message}`;
  if (/ECONNREFUSED/.test(text)) return 'connection refused: nothing listens at that address';
  // Redis 7's sentinels say "No such master"; older ones answer with no address.
  if (/No such master|successfully, but got an invalid reply/i.test(text))
    return 'the sentinels know no master by that name (memory.redis.name)';
  if (/All sentinels are unreachable/i.test(text)) return 'no sentinel answered at the addresses given';
  if (/Failed to refresh slots cache|cluster support disabled/i.test(text))
    return 'no seed node answered as a Redis Cluster node (is cluster mode on?)';
  if (/ENOTFOUND|EAI_AGAIN/.test(text)) return 'its host name does not resolve';
  if (/ETIMEDOUT|timeout/i.test(text)) return `no answer within ${timeoutMs} ms`;
  if (/NOAUTH|WRONGPASS|invalid password|AUTH/i.test(text))
    return 'it refused the credentials (in the URL, or memory.redis.username/password)';
  if (/ECONNRESET|EPIPE|closed/i.test(text)) return 'it closed the connection (is it Redis, and is TLS right: redis:// vs rediss://?)';
  return err.message.split('\n')[0].slice(0, 120);
}
