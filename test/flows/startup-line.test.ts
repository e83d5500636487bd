import { readFileSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { startFakeUpstream, type FakeUpstream } from '../helpers/fake-upstream.js';
import { freePort } from '../helpers/ports.js';
import { jsonLines, listening, runGateway, type Proc } from '../helpers/process.js';
import { HAVE_REDIS, startRedis, type TestRedis } from '../helpers/redis.js';

// What an operator reads when the built process starts: one line with what is in force, and a
// warning for each setting that will probably not do what was meant. Never a credential.

const VERSION = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')).version;

let proc: Proc | undefined;
let upstream: FakeUpstream | undefined;
let redis: TestRedis | undefined;
afterEach(async () => {
  proc?.child.kill('SIGKILL');
  await upstream?.close();
  await redis?.stop();
  proc = upstream = redis = undefined;
});

const ready = (p: Proc) => jsonLines(p).find((l) => l.msg === 'gateway ready');
const warnings = (p: Proc) =>
  jsonLines(p)
    .filter((l) => l.level === 40)
    .map((l) => l.msg as string);

describe('the startup line', () => {
  it('says what is in force, and warns about a base URL without a version path and a Redis that is down', async () => {
    upstream = await startFakeUpstream();
    const redisPort = await freePort();
    proc = runGateway([], {
      PORT: '0',
      UPSTREAM_URL: upstream.origin,
      UPSTREAM_API_KEY: 'sk-upstream-secret',
      GATEWAY_API_KEYS: 'gw-key-one,gw-key-two',
      SUMMARIZER_URL: 'http://127.0.0.1:9/v1',
      SUMMARIZER_MODEL: 'small-model',
      MEMORY_REDIS_URL: `redis://:redis-secret@127.0.0.1:${redisPort}`,
      COMPACTION_PROACTIVE: 'true',
    });
    await listening(proc);
    await expect.poll(() => warnings(proc!).length, { timeout: 10_000 }).toBe(3);
    expect(ready(proc)).toMatchObject({
      config: expect.stringMatching(/config\/default\.yaml$/),
      upstreams: [
        {
          name: 'default',
          url: `${upstream.origin}/`,
          prefix: '/default',
          apis: 'chat,responses,messages,gemini',
          key: "the gateway's own (upstream.apiKey)",
          proxy: 'direct (no HTTPS_PROXY or HTTP_PROXY set)',
          summarizer: 'http://127.0.0.1:9/v1, model small-model',
        },
      ],
      defaultUpstream: 'default',
      auth: 'on (2 gateway keys)',
      memory: `redis redis://:***@127.0.0.1:${redisPort} (not reachable at start)`,
      proactive: true,
      version: VERSION,
      node: process.version,
      pid: proc.child.pid,
    });
    const [noVersion, uncredentialed, redisDown] = warnings(proc);
    expect(uncredentialed).toMatch(
      /^the summarizer of upstream default is http:\/\/127\.0\.0\.1:9, which is not on default's origin and has no key of its own/,
    );
    expect(noVersion).toMatch(new RegExp(`upstream\\.url ${upstream.origin}/ has no version path.*/v1`));
    expect(redisDown).toBe(
      `Redis at redis://:***@127.0.0.1:${redisPort} is not reachable (connection refused: nothing listens at that address). ` +
        'The gateway serves requests without compaction memory until Redis answers, then uses it again by itself.',
    );
    expect(proc.output()).not.toMatch(/sk-upstream-secret|gw-key-one|gw-key-two|redis-secret/);
  });

  it('with the defaults: the shipped config, local memory, no warnings', async () => {
    upstream = await startFakeUpstream();
    proc = runGateway([], { PORT: '0', UPSTREAM_URL: upstream.baseUrl });
    await listening(proc);
    await expect.poll(() => ready(proc!), { timeout: 10_000 }).toBeTruthy();
    expect(ready(proc)).toMatchObject({
      upstreams: [
        expect.objectContaining({
          url: upstream.baseUrl,
          key: "the client's",
          summarizer: "the request's own upstream, the request's model",
        }),
      ],
      auth: 'off',
      compaction: 'summarize',
      memory: 'local (in-process)',
      proactive: true,
    });
    expect(warnings(proc)).toEqual([]);
  });

  it.skipIf(!HAVE_REDIS)('says when Redis answers at start', async () => {
    redis = await startRedis();
    upstream = await startFakeUpstream();
    proc = runGateway([], { PORT: '0', UPSTREAM_URL: upstream.baseUrl, MEMORY_REDIS_URL: redis.url });
    await listening(proc);
    await expect.poll(() => ready(proc!), { timeout: 10_000 }).toBeTruthy();
    expect(ready(proc).memory).toBe(`redis ${redis.url} (reachable)`);
    expect(warnings(proc)).toEqual([]);
  });

  it('LOG_FORMAT=pretty prints readable lines instead of JSON', async () => {
    upstream = await startFakeUpstream();
    proc = runGateway([], { PORT: '0', UPSTREAM_URL: upstream.baseUrl, LOG_FORMAT: 'pretty' });
    await listening(proc);
    await expect.poll(() => proc!.output(), { timeout: 10_000 }).toMatch(/INFO.*gateway ready/);
    expect(proc.output()).toMatch(/"url": "http:\/\/127\.0\.0\.1:\d+\/v1"/);
    expect(jsonLines(proc)).toEqual([]);
  });
});
