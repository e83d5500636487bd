import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config/load.js';
import { apiOfPath } from '../../src/dialects/index.js';
import { byPrefix, globPattern, resolveUpstreams } from '../../src/upstream/upstreams.js';
import { runGateway, type Proc } from '../helpers/process.js';

// Named upstreams as an operator writes them: what a mistake in them says (one line at its key,
// exit 2 from the built process), and where each request goes once they load.

function file(text: string): string {
  const path = join(mkdtempSync(join(tmpdir(), 'gw-upstreams-')), 'gw.yaml');
  writeFileSync(path, text);
  return path;
}

function problems(text: string, env: Record<string, string> = {}): string[] {
  try {
    loadConfig(['--config', file(text)], env);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as ConfigError).problems;
  }
  throw new Error('expected a ConfigError');
}

const THREE = `
upstreams:
  openai: { url: "https://api.openai.com/v1", apiKey: sk-openai }
  anthropic: { url: "https://api.anthropic.com/v1", apiKey: sk-ant, apis: [messages] }
  local: { url: "http://127.0.0.1:8000/v1", apis: [chat] }
defaultUpstream: openai
`;

describe('a config of named upstreams that cannot work', () => {
  it('names an upstream that is not there in a route: one line at the route, listing the names', () => {
    expect(problems(`${THREE}routes:\n  - { model: "qwen*", upstream: lokal }\n`)).toEqual([
      'routes.0.upstream: names no upstream: "lokal"; the upstreams are anthropic, local, openai',
    ]);
  });

  it('routes an API to an upstream that does not serve it', () => {
    expect(problems(`${THREE}routes:\n  - { api: messages, upstream: local }\n`)).toEqual([
      'routes.0: routes the messages API to local, which does not serve it (its apis: chat)',
    ]);
  });

  it('gives two upstreams one prefix: a YAML key twice, or upstream.url beside an upstream named default', () => {
    const twice = problems(`upstreams:\n  openai: { url: "https://a.example/v1" }\n  openai: { url: "https://b.example/v1" }\n`);
    expect(twice).toHaveLength(1);
    expect(twice[0]).toMatch(/Map keys must be unique/);
    expect(problems(`upstreams:\n  default: { url: "https://a.example/v1" }\n`, { UPSTREAM_URL: 'https://b.example/v1' })).toEqual([
      'upstreams.default: two upstreams are named default (prefix /default): upstream.url (UPSTREAM_URL) defines one beside upstreams; drop one of them',
    ]);
  });

  it('names an upstream so that its prefix would shadow /v1, or not as a word', () => {
    expect(problems(`upstreams:\n  v1: { url: "https://a.example/v1" }\n`)).toEqual([
      "upstreams.v1: the prefix /v1 would shadow the gateway's own /v1: choose another name",
    ]);
    expect(problems(`upstreams:\n  OpenAI: { url: "https://a.example/v1" }\n`)[0]).toMatch(
      /^upstreams\.OpenAI: an upstream name is a lowercase word/,
    );
  });

  it('sets a default that is not there, a route without api or model, a key without its URL', () => {
    expect(problems(`${THREE.replace('defaultUpstream: openai', 'defaultUpstream: azure')}`)).toEqual([
      'defaultUpstream: names no upstream: "azure"; the upstreams are anthropic, local, openai',
    ]);
    expect(problems(`${THREE}routes:\n  - { upstream: local }\n`)[0]).toMatch(/^routes\.0: needs api or model/);
    expect(problems(`${THREE}routes:\n  - { unknownModel: false, upstream: local }\n`)[0]).toMatch(/^routes\.0\.unknownModel: /);
    expect(problems(`${THREE}routes:\n  - { model: "qwen*", unknownModel: true, upstream: local }\n`)).toEqual([
      'routes.0: has both model and unknownModel: a route matches a model it read, or one it could not read, not both',
    ]);
    expect(problems(THREE, { UPSTREAM_API_KEY: 'sk-x' })[0]).toMatch(
      /^upstream\.apiKey \(from UPSTREAM_API_KEY\): is set without upstream\.url/,
    );
  });

  it('puts two upstreams on one origin with different proxies (one pool per origin)', () => {
    const text = `upstreams:\n  a: { url: "https://h.example/a/v1" }\n  b: { url: "https://h.example/b/v1", proxy: none }\n`;
    expect(problems(text)).toEqual([
      'upstreams.b: shares the origin https://h.example with a but not its proxy, caFile, connectTimeoutMs, firstByteTimeoutMs, idleTimeoutMs: the gateway keeps one connection pool per origin; give them the same',
    ]);
  });

  it('points caFile at a file that is not there, or holds no certificate', () => {
    expect(problems(`upstreams:\n  a: { url: "https://h.example/v1", caFile: /nonexistent/ca.pem }\n`)[0]).toMatch(
      /^upstreams\.a\.caFile: cannot be read: ENOENT/,
    );
    expect(problems(`upstream:\n  caFile: ${file('not a pem')}\n`)[0]).toMatch(
      /^upstream\.caFile \(or UPSTREAM_CA_FILE\): .* holds no PEM certificate/,
    );
  });

  it('sets a summarizer key without its URL beside upstreams: it would reach every provider', () => {
    expect(problems(THREE, { SUMMARIZER_API_KEY: 'sk-meant-for-one' })).toEqual([
      "summarizer.apiKey (from SUMMARIZER_API_KEY): is set without summarizer.url beside upstreams: it would go to every upstream's summarizer calls; set summarizer.url (the key goes there only), or give the upstream that needs it its own summarizer.apiKey",
    ]);
    expect(() =>
      loadConfig(['--config', file(THREE)], { SUMMARIZER_API_KEY: 'sk-x', SUMMARIZER_URL: 'https://s.example/v1' }),
    ).not.toThrow();
  });

  it('suggests the key meant inside an upstream', () => {
    expect(problems(`upstreams:\n  a: { url: "https://h.example/v1", api_key: x }\n`)).toEqual([
      'upstreams.a.api_key: unknown key; did you mean apiKey?',
    ]);
  });
});

describe('the built gateway refusing such a config', () => {
  let proc: Proc | undefined;
  afterEach(() => {
    proc?.child.kill('SIGKILL');
    proc = undefined;
  });

  it('exits 2 with one clear line per mistake, and never a key', async () => {
    const text = `${THREE}routes:\n  - { api: messages, upstream: local }\n  - { model: "x*", upstream: nope }\n`;
    proc = runGateway(['--config', file(text)], { PORT: '0' });
    expect(await proc.exitWithin(10_000)).toMatchObject({ code: 2 });
    const out = proc.output();
    expect(out).toContain(
      'compaction-gateway: invalid configuration: routes.0: routes the messages API to local, which does not serve it (its apis: chat)',
    );
    expect(out).toContain(
      'compaction-gateway: invalid configuration: routes.1.upstream: names no upstream: "nope"; the upstreams are anthropic, local, openai',
    );
    expect(out).not.toMatch(/sk-openai|sk-ant/);
  });
});

describe('where requests go', () => {
  const config = loadConfig(
    ['--config', file(`${THREE}routes:\n  - { api: messages, upstream: anthropic }\n  - { model: "qwen*", upstream: local }\n`)],
    {},
  );
  const upstreams = resolveUpstreams(config);
  const pick = (api: Parameters<typeof upstreams.pick>[0], model?: string) => {
    const u = upstreams.pick(api, model);
    return 'refused' in u ? u.refused : u.name;
  };

  it('by route: first match, its upstream serving the API; else the default', () => {
    expect(pick('messages', 'claude-sonnet-4')).toBe('anthropic');
    expect(pick('chat', 'qwen3-coder')).toBe('local');
    expect(pick('chat', 'gpt-5')).toBe('openai');
    // A qwen model on the Responses API: local serves only chat, so the route does not match.
    expect(pick('responses', 'qwen3-coder')).toBe('openai');
    expect(pick(undefined)).toBe('openai');
  });

  it('by prefix, whatever the routes; an upstream that does not serve the API is a sentence naming who does', () => {
    const local = upstreams.named('local')!;
    expect(byPrefix(upstreams, '/local/v1/chat/completions')).toEqual({ upstream: local, rest: '/v1/chat/completions' });
    expect(byPrefix(upstreams, '/v1/chat/completions')).toBeNull();
    const refused = upstreams.prefixed(local, 'messages');
    expect('refused' in refused && refused.refused).toBe(
      'The upstream local does not serve the Anthropic Messages API (it serves Chat Completions). Base URLs that serve it here: /openai/v1, /anthropic/v1.',
    );
  });

  it('with no default, a request no route matches is refused', () => {
    const bare = resolveUpstreams(
      loadConfig(['--config', file(THREE.replace('defaultUpstream: openai', '').replace('openai:', 'oai:'))], {}),
    );
    expect(bare.fallback).toBeUndefined();
    const u = bare.pick('chat', 'gpt-5');
    expect('refused' in u && u.refused).toMatch(
      /^No upstream of this gateway serves the Chat Completions API for the model "gpt-5": no route matches and no defaultUpstream is set\. Base URLs that serve it here: \/oai\/v1, \/local\/v1\.$/,
    );
  });

  it('one upstream as before: named default, every API, its URL as its memory key', () => {
    const single = resolveUpstreams(loadConfig([], { UPSTREAM_URL: 'http://127.0.0.1:9/v1', UPSTREAM_API_KEY: 'sk-x' }));
    expect(single.all.map((u) => [u.name, u.url, u.apiKey, u.memoryKey, [...u.apis]])).toEqual([
      ['default', 'http://127.0.0.1:9/v1', 'sk-x', 'http://127.0.0.1:9/v1', ['chat', 'responses', 'messages', 'gemini']],
    ]);
    expect(single.fallback?.name).toBe('default');
    expect(resolveUpstreams(loadConfig([], {})).all[0].url).toBe('https://api.openai.com/v1');
  });

  it('globs match the whole model, * any run and ? one character, nothing else special', () => {
    expect(globPattern('qwen*').test('qwen3-coder')).toBe(true);
    expect(globPattern('qwen*').test('my-qwen3')).toBe(false);
    expect(globPattern('gpt-?').test('gpt-5')).toBe(true);
    expect(globPattern('gpt-4.1').test('gpt-401')).toBe(false);
  });

  it('reads the API off pass-through paths by family', () => {
    expect(apiOfPath('/v1/messages/count_tokens')).toBe('messages');
    expect(apiOfPath('/v1/responses/resp_1/input_items')).toBe('responses');
    expect(apiOfPath('/v1/chat/completions/abc')).toBe('chat');
    expect(apiOfPath('/v1beta/models/gemini-2.5-pro:countTokens')).toBe('gemini');
    expect(apiOfPath('/v1/models')).toBeUndefined();
    expect(apiOfPath('/v1/messagesx')).toBeUndefined();
  });
});
