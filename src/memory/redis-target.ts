import type { Config } from '../config/schema.js';

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

export interface Address {
  host: string;
  port: number;
}

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

function addressOf(text: string): Address {
  const at = text.lastIndexOf(':');
  return { host: text.slice(0, at).replace(/^\[(.*)\]$/, '$1'), port: Number(text.slice(at + 1)) };
}

export function memoryRedis(config: Readonly<Config>): RedisTarget | undefined {
  return config.memory.enabled ? redisTargetOf(config.memory) : undefined;
}
