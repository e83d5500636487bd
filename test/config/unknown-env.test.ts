import OpenAI from 'openai';
import { afterEach, describe, expect, it } from 'vitest';
import { ENV_NAMES, unknownVariables } from '../../src/config/load.js';
import { startFakeUpstream, type FakeUpstream } from '../helpers/fake-upstream.js';
import { jsonLines, listening, runGateway, type Proc } from '../helpers/process.js';

// A misspelt variable with one of the gateway's prefixes used to be ignored in silence: the
// gateway started with auth off, or without the provider key. Now each one is a WARN line naming
// the variable (never its value) and the variable probably meant.

let proc: Proc | undefined;
let upstream: FakeUpstream | undefined;
afterEach(async () => {
  proc?.child.kill('SIGKILL');
  await upstream?.close();
  proc = upstream = undefined;
});

const warned = (p: Proc) => jsonLines(p).filter((l) => l.level === 40);

describe('unknown environment variables', () => {
  it('each is a WARN line with "did you mean", without its value; the gateway starts as configured without them', async () => {
    upstream = await startFakeUpstream();
    proc = runGateway([], {
      PORT: '0',
      UPSTREAM_URL: upstream.baseUrl,
      UPSTREAM_APIKEY: 'sk-typo-value-1',
      GATEWAY_API_KEY: 'gw-typo-value-2',
      COMPACTION_STRATEGIE: 'fallback-typo-value-3',
      MEMORY_COLOUR: 'typo-value-4',
    });
    const origin = await listening(proc);
    await expect.poll(() => warned(proc!).length, { timeout: 10_000 }).toBe(4);
    const byName = Object.fromEntries(warned(proc).map((l) => [l.variable, l]));
    expect(byName.UPSTREAM_APIKEY).toMatchObject({
      didYouMean: 'UPSTREAM_API_KEY',
      msg: expect.stringMatching(/UPSTREAM_APIKEY .*did you mean UPSTREAM_API_KEY \(upstream\.apiKey\)\?/),
    });
    expect(byName.GATEWAY_API_KEY).toMatchObject({
      didYouMean: 'GATEWAY_API_KEYS',
      msg: expect.stringMatching(/did you mean GATEWAY_API_KEYS \(auth\.keys\)\?/),
    });
    expect(byName.COMPACTION_STRATEGIE).toMatchObject({ didYouMean: 'COMPACTION_STRATEGY' });
    expect(byName.MEMORY_COLOUR.didYouMean).toBeUndefined();
    expect(byName.MEMORY_COLOUR.msg).toMatch(/MEMORY_COLOUR is set, but the gateway reads no such variable and ignores it/);
    expect(proc.output()).not.toMatch(/typo-value/);

    // What the operator would otherwise find out later: no provider key, no auth.
    const ready = jsonLines(proc).find((l) => l.msg === 'gateway ready');
    expect(ready).toMatchObject({ upstreams: [expect.objectContaining({ key: "the client's" })], auth: 'off' });
    const sdk = new OpenAI({ baseURL: `${origin}/v1`, apiKey: 'sk-client-own', maxRetries: 0, timeout: 10_000 });
    await sdk.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'hi' }] });
    expect(upstream.received.at(-1)!.headers.authorization).toBe('Bearer sk-client-own');
  });

  it('a config error is followed by the variable probably meant', async () => {
    proc = runGateway([], { PORT: '0', GATEWAY_API_KEYS: 'gw-real', UPSTREAM_APIKEY: 'sk-typo' });
    expect(await proc.exitWithin(10_000)).toMatchObject({ code: 2 });
    const out = proc.output();
    expect(out).toMatch(
      /^compaction-gateway: invalid configuration: upstream\.apiKey \(or UPSTREAM_API_KEY\): is required when auth\.keys is set/m,
    );
    expect(out).toMatch(/warning: environment variable UPSTREAM_APIKEY is set, .*did you mean UPSTREAM_API_KEY/);
    expect(out).not.toMatch(/gw-real|sk-typo/);
  });

  it('names the variable meant for common slips, and nothing for unrelated names', () => {
    const meant = (name: string) => unknownVariables({ [name]: 'x' })[0]?.meant?.name;
    expect(meant('GATEWAY_API_KEY')).toBe('GATEWAY_API_KEYS');
    expect(meant('UPSTREAM_APIKEY')).toBe('UPSTREAM_API_KEY');
    expect(meant('UPSTREAM_KEY')).toBe('UPSTREAM_API_KEY');
    expect(meant('UPSTREAM_BASE_URL')).toBe('UPSTREAM_URL');
    expect(meant('SUMMARIZER_TIMEOUT')).toBe('SUMMARIZER_TIMEOUT_MS');
    expect(meant('MEMORY_REDISURL')).toBe('MEMORY_REDIS_URL');
    expect(meant('GATEWAY_PORT')).toBe('PORT');
    expect(meant('GATEWAY_LOG_LEVEL')).toBe('LOG_LEVEL');
    expect(meant('COMPACTION_KEEP_RECNET')).toBe('COMPACTION_KEEP_RECENT');
    expect(meant('MEMORY_COLOUR')).toBeUndefined();
    expect(unknownVariables({ MEMORY_COLOUR: 'x' })).toEqual([{ name: 'MEMORY_COLOUR' }]);
  });

  it('says nothing about the gateway\u2019s own variables or other programs\u2019', () => {
    const env = Object.fromEntries(
      [...ENV_NAMES, 'PATH', 'HOME', 'CONFIG', 'NODE_OPTIONS', 'OPENAI_API_KEY', 'LOG_FILE'].map((n) => [n, 'x']),
    );
    expect(unknownVariables(env)).toEqual([]);
  });
});
