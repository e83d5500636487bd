import type { Address, RedisTarget } from './redis-target.js';

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

function loggableRedisUrl(url: string): string {
  const parsed = new URL(url);
  const user = parsed.username || parsed.password ? `${parsed.username}${parsed.password ? ':***' : ''}@` : '';
  return `${parsed.protocol}//${user}${parsed.host}${parsed.pathname === '/' ? '' : parsed.pathname}`;
}

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

export function describeRedisError(err: Error & { code?: string }, timeoutMs: number): string {
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
