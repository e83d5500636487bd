import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig, validateConfig } from '../../src/config/load.js';
import { probeRedis } from '../../src/memory/redis-client.js';
import { redisTargetOf } from '../../src/memory/redis-target.js';
import { describeRedisTarget, redisUnreachable } from '../../src/memory/redis-wording.js';
import { startupFields } from '../../src/process/startup.js';
import { HAVE_REDIS, startRedis, type TestRedis } from '../helpers/redis.js';
import { makePrivateCa, type PrivateCa } from '../helpers/tls-standin.js';
import { overflowAt, startReplicas, turn, type Replicas } from './replicas.js';

/*
 * memory.redis: one URL, a cluster or sentinels, with credentials and TLS; from a config file's
 * keys or the environment. What the ready line says of it never holds a secret, and a mistake is
 * one line naming the key.
 */

const problems = (input: unknown): string[] => {
  try {
    validateConfig(input);
    return [];
  } catch (err) {
    return (err as ConfigError).problems;
  }
};
const target = (memory: Record<string, unknown>) => redisTargetOf(validateConfig({ memory }).memory);

describe('memory.redis', () => {
  it.each([
    ['a URL, as memory.redisUrl', { redis: 'redis://cache:6379/2' }, { kind: 'node', url: 'redis://cache:6379/2', tls: false }],
    ['memory.redisUrl, as before', { redisUrl: 'rediss://cache:6380' }, { kind: 'node', url: 'rediss://cache:6380', tls: true }],
    [
      'memory.redisUrl with credentials from memory.redis',
      { redisUrl: 'redis://cache:6379', redis: { username: 'gw', password: 'pw', tls: true } },
      { kind: 'node', url: 'redis://cache:6379', username: 'gw', password: 'pw', tls: true },
    ],
    [
      'cluster seed nodes',
      { redis: { cluster: ['10.0.0.1:7000', '[fd00::2]:7001'], password: 'pw' } },
      {
        kind: 'cluster',
        nodes: [
          { host: '10.0.0.1', port: 7000 },
          { host: 'fd00::2', port: 7001 },
        ],
        password: 'pw',
        tls: false,
      },
    ],
    [
      'sentinels and the master name',
      { redis: { sentinels: ['s1:26379', 's2:26379'], name: 'mymaster', db: 3, sentinelPassword: 'spw', caFile: undefined } },
      {
        kind: 'sentinel',
        sentinels: [
          { host: 's1', port: 26379 },
          { host: 's2', port: 26379 },
        ],
        name: 'mymaster',
        db: 3,
        sentinelPassword: 'spw',
        tls: false,
      },
    ],
  ])('%s', (_what, memory, expected) => {
    expect(target(memory)).toEqual(expected);
  });

  it('is unset: in-process memory', () => {
    expect(target({})).toBeUndefined();
  });

  it('takes the common cases from the environment', () => {
    const env = {
      MEMORY_REDIS_SENTINELS: '127.0.0.1:26379, 127.0.0.1:26380',
      MEMORY_REDIS_SENTINEL_NAME: 'gw',
      MEMORY_REDIS_PASSWORD: 'pw',
      MEMORY_REDIS_SENTINEL_PASSWORD: 'spw',
      MEMORY_REDIS_USERNAME: 'gateway',
      MEMORY_REDIS_TLS: 'true',
    };
    expect(redisTargetOf(loadConfig([], env).memory)).toEqual({
      kind: 'sentinel',
      sentinels: [
        { host: '127.0.0.1', port: 26379 },
        { host: '127.0.0.1', port: 26380 },
      ],
      name: 'gw',
      username: 'gateway',
      password: 'pw',
      sentinelPassword: 'spw',
      tls: true,
    });
    expect(redisTargetOf(loadConfig([], { MEMORY_REDIS_CLUSTER_NODES: 'a:7000,b:7000' }).memory)).toMatchObject({
      kind: 'cluster',
      nodes: [
        { host: 'a', port: 7000 },
        { host: 'b', port: 7000 },
      ],
    });
    // MEMORY_REDIS_URL works as it did, and takes a password from MEMORY_REDIS_PASSWORD
    expect(redisTargetOf(loadConfig([], { MEMORY_REDIS_URL: 'redis://r:6379', MEMORY_REDIS_PASSWORD: 'pw' }).memory)).toEqual({
      kind: 'node',
      url: 'redis://r:6379',
      password: 'pw',
      tls: false,
    });
  });

  it.each([
    [{ redis: 'redis://a', redisUrl: 'redis://b' }, 'memory.redis: says where Redis is, and so does memory.redisUrl: keep one'],
    [
      { redis: { sentinels: ['s:26379'] } },
      'memory.redis.name (or MEMORY_REDIS_SENTINEL_NAME): needs the name of the master the sentinels watch (sentinel monitor NAME ...)',
    ],
    [
      { redis: { cluster: ['a:1'], sentinels: ['s:2'], name: 'm' } },
      'memory.redis: takes one of url, cluster or sentinels; got cluster and sentinels',
    ],
    [{ redis: { cluster: ['a'] } }, 'memory.redis.cluster.0: must be host:port; got "a"'],
    [{ redis: { cluster: ['a:1'], db: 1 } }, 'memory.redis.db: a Redis Cluster has database 0 only; got 1'],
    [{ redis: { password: 'pw' } }, 'memory.redis: needs url, cluster or sentinels (or memory.redisUrl)'],
    [
      { redis: { cluster: ['a:1'], sentinelPassword: 'hunter2' } },
      'memory.redis.sentinelPassword (or MEMORY_REDIS_SENTINEL_PASSWORD): is for sentinels only',
    ],
    [{ redis: 'http://admin:hunter2@cache:6379' }, 'memory.redis: must be a redis:// or rediss:// URL; got "http://cache:6379/"'],
    [{ redis: 7 }, 'memory.redis: must be a redis:// URL or a mapping with url, cluster or sentinels; got 7'],
    [
      { redis: { cluster: ['a:1'], caFile: '/nonexistent/ca.pem' } },
      "memory.redis.caFile (or MEMORY_REDIS_CA_FILE): cannot be read: ENOENT: no such file or directory, open '/nonexistent/ca.pem'",
    ],
  ])('a mistake is one line naming its key: %j', (memory, problem) => {
    expect(problems({ memory })).toEqual([problem]);
  });

  it('no problem line shows a password', () => {
    expect(problems({ memory: { redis: { cluster: ['a:1'], password: '' } } }).join('\n')).toMatch(
      /memory\.redis\.password \(or MEMORY_REDIS_PASSWORD\): .*got \[redacted\]/,
    );
  });

  it('the ready line says where memory is, with no secret', () => {
    const line = (memory: Record<string, unknown>) =>
      startupFields(validateConfig({ memory }), undefined, { gateway: 'x', node: 'y' }).memory;
    expect(line({ redisUrl: 'redis://:hunter2@cache:6379/1' })).toBe('redis redis://:***@cache:6379/1');
    expect(line({ redis: { cluster: ['10.0.0.1:7000', '10.0.0.2:7000'], password: 'hunter2', tls: true } })).toBe(
      'redis cluster 10.0.0.1:7000, 10.0.0.2:7000, TLS',
    );
    expect(line({ redis: { sentinels: ['s1:26379'], name: 'mymaster', sentinelPassword: 'hunter2' } })).toBe(
      'redis sentinel master mymaster via s1:26379',
    );
    expect(line({ enabled: false, redis: 'redis://cache' })).toBe('off');
    expect(line({})).toBe('local (in-process)');
    expect(describeRedisTarget({ kind: 'node', url: 'rediss://u:hunter2@c:6380', tls: true })).toBe('redis rediss://u:***@c:6380');
  });

  it('the WARN for a Redis not reachable at start names it, with no secret', () => {
    const problem = 'no answer within 1000 ms';
    expect(redisUnreachable({ kind: 'node', url: 'redis://:pw@r:6379', tls: false }, problem).message).toMatch(
      /^Redis at redis:\/\/:\*\*\*@r:6379 is not reachable \(no answer within 1000 ms\)\. The gateway serves/,
    );
    expect(redisUnreachable({ kind: 'cluster', nodes: [{ host: 'a', port: 7000 }], password: 'pw', tls: false }, problem).message).toMatch(
      /^The Redis Cluster at a:7000 is not reachable/,
    );
    expect(
      redisUnreachable(
        { kind: 'sentinel', sentinels: [{ host: 's', port: 26379 }], name: 'm', sentinelPassword: 'pw', tls: false },
        problem,
      ),
    ).toMatchObject({ redis: 'sentinel master m via s:26379' });
  });
});

/*
 * TLS with a private CA and an ACL user, against a real redis-server that serves TLS only: the
 * certificate is trusted through memory.redis.caFile, and the credentials come from memory.redis.
 */
describe.skipIf(!HAVE_REDIS)('memory in Redis over TLS, with a username and password', () => {
  let ca: PrivateCa;
  let redis: TestRedis;
  let replicas: Replicas | undefined;
  beforeAll(async () => {
    ca = makePrivateCa();
    redis = await startRedis({
      tls: { certFile: ca.serverCert, keyFile: ca.serverKey, caFile: ca.caPem },
      user: { name: 'gateway', password: 'tls-secret' },
    });
  }, 30_000);
  afterAll(async () => {
    await replicas?.close();
    await redis?.stop();
    ca?.remove();
  });

  const node = (extra: Record<string, unknown>) => ({ kind: 'node' as const, url: redis.url, tls: true, ...extra });

  it('the probe says what is wrong: an untrusted certificate, refused credentials', async () => {
    expect(await probeRedis(node({ username: 'gateway', password: 'tls-secret' }))).toMatch(/certificate|self.signed|unable to verify/i);
    expect(await probeRedis(node({ caFile: ca.caPem, username: 'gateway', password: 'wrong' }))).toBe(
      'it refused the credentials (in the URL, or memory.redis.username/password)',
    );
    expect(await probeRedis(node({ caFile: ca.caPem, username: 'gateway', password: 'tls-secret' }))).toBeNull();
  });

  it('two replicas share memory through it', async () => {
    replicas = await startReplicas({ redis: { url: redis.url, caFile: ca.caPem, username: 'gateway', password: 'tls-secret' } });
    expect(await turn(replicas.a, overflowAt, 'sk-tls')).toEqual({ status: 200, memory: 'miss' });
    expect(await turn(replicas.b, overflowAt + 1, 'sk-tls')).toEqual({ status: 200, memory: 'hit' });
  }, 30_000);
});
