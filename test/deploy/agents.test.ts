// The agent setup snippets in deploy/agents/, shown in docs/agents.md: each parses as its agent reads
// it, uses the keys its agent's documentation names, appears in docs/agents.md unchanged, and the
// URL the agent builds from it reaches the right route of a real gateway (the chat ones through
// a rescue). The agents themselves are not installed: this checks the files and the gateway.
import { spawnSync } from 'node:child_process';
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import OpenAI from 'openai';
import { parse as parseToml } from 'smol-toml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { completion, json, startFakeUpstream, type FakeUpstream } from '../helpers/fake-upstream.js';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { NGINX_413 } from '../helpers/provider.js';
import { agentRequest, parseCompactionHeader } from '../helpers/rescue.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const AGENTS = join(ROOT, 'deploy', 'agents');
const AGENTS_DOC = readFileSync(join(ROOT, 'docs', 'agents.md'), 'utf8');
const read = (path: string) => readFileSync(join(AGENTS, path), 'utf8');
/** Where every snippet points: the gateway on its default port. */
const GATEWAY = 'http://127.0.0.1:8080';
const ENV_NAME = /^[A-Z_][A-Z0-9_]*$/;

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? files(path) : [path];
  });
}

/** Fails on keys the agent's documentation does not name (a misspelt key is silently ignored by most agents). */
function expectOnlyKeys(obj: object, allowed: string[], where: string): void {
  expect(
    Object.keys(obj).filter((k) => !allowed.includes(k)),
    `unknown keys in ${where}`,
  ).toEqual([]);
}

const codex: any = parseToml(read('codex/config.toml'));
const claude: any = JSON.parse(read('claude-code/settings.json'));
const opencode: any = JSON.parse(read('opencode/opencode.json'));
const pi: any = JSON.parse(read('pi/models.json'));
/** A .env file as its agent reads it: NAME=value lines, comments and blank lines aside. */
function readEnv(path: string): Record<string, string> {
  return Object.fromEntries(
    read(path)
      .split('\n')
      .filter((line) => line.trim() && !line.trim().startsWith('#'))
      .map((line) => {
        const m = /^([A-Z_][A-Z0-9_]*)=(.*)$/.exec(line);
        expect(m, `${path} line ${JSON.stringify(line)}`).not.toBeNull();
        return [m![1], m![2]];
      }),
  );
}

const qwen = readEnv('qwen-code/.env');
const aider: any = parseYaml(read('aider/.aider.conf.yml'));
const geminiSettings: any = JSON.parse(read('gemini-cli/settings.json'));
const geminiEnv = readEnv('gemini-cli/.env');
const pythonSdk = read('openai-sdk/client.py');
const nodeSdk = read('openai-sdk/client.mjs');

describe('agent snippets: the files', () => {
  it('docs/agents.md shows every file under deploy/agents/ unchanged, in a code block', () => {
    const all = files(AGENTS);
    expect(all.length).toBeGreaterThanOrEqual(8);
    for (const file of all) {
      const text = readFileSync(file, 'utf8');
      expect(
        AGENTS_DOC.includes('```') && AGENTS_DOC.includes(`\n${text}\`\`\``),
        `docs/agents.md shows ${file.slice(AGENTS.length + 1)} as it is`,
      ).toBe(true);
    }
  });

  it('Codex: a [model_providers.gateway] on the gateway, Responses API, key from a variable, selected', () => {
    expectOnlyKeys(codex, ['model', 'model_provider', 'model_providers'], 'config.toml');
    expect(codex.model_provider).toBe('gateway');
    const provider = codex.model_providers[codex.model_provider];
    expectOnlyKeys(
      provider,
      [
        'name',
        'base_url',
        'env_key',
        'wire_api',
        'query_params',
        'http_headers',
        'env_http_headers',
        'request_max_retries',
        'stream_max_retries',
        'stream_idle_timeout_ms',
      ],
      '[model_providers.gateway]',
    );
    expect(provider).toMatchObject({ base_url: `${GATEWAY}/v1`, wire_api: 'responses' });
    expect(provider.env_key).toMatch(ENV_NAME);
    expect(typeof provider.name).toBe('string');
  });

  it('Claude Code: settings.json env block with a base URL without /v1 (Claude Code appends /v1/messages)', () => {
    expectOnlyKeys(claude, ['$schema', 'env', 'model', 'apiKeyHelper'], 'settings.json');
    expectOnlyKeys(claude.env, ['ANTHROPIC_BASE_URL', 'ANTHROPIC_AUTH_TOKEN', 'ANTHROPIC_API_KEY', 'ANTHROPIC_MODEL'], 'settings.json env');
    expect(claude.env.ANTHROPIC_BASE_URL).toBe(GATEWAY);
    expect(new URL(claude.env.ANTHROPIC_BASE_URL).pathname).toBe('/');
    expect(AGENTS_DOC).toContain(`ANTHROPIC_BASE_URL=${GATEWAY} claude`);
  });

  it('Gemini CLI: the API-key sign-in selected, and GOOGLE_GEMINI_BASE_URL the gateway\u2019s origin (it appends /v1beta/models/...)', () => {
    expect(geminiSettings).toEqual({ security: { auth: { selectedType: 'gemini-api-key' } } });
    expectOnlyKeys(geminiEnv, ['GOOGLE_GEMINI_BASE_URL', 'GEMINI_API_KEY', 'GEMINI_MODEL'], 'gemini-cli/.env');
    expect(geminiEnv.GOOGLE_GEMINI_BASE_URL).toBe(GATEWAY);
    expect(new URL(geminiEnv.GOOGLE_GEMINI_BASE_URL).pathname).toBe('/');
  });

  it('opencode: an @ai-sdk/openai-compatible provider whose baseURL is the gateway, and a model of it selected', () => {
    expectOnlyKeys(opencode, ['$schema', 'provider', 'model', 'small_model'], 'opencode.json');
    expect(opencode.$schema).toBe('https://opencode.ai/config.json');
    const [id, provider] = Object.entries<any>(opencode.provider)[0];
    expectOnlyKeys(provider, ['npm', 'name', 'options', 'models'], `provider.${id}`);
    expect(provider.npm).toBe('@ai-sdk/openai-compatible');
    expectOnlyKeys(provider.options, ['baseURL', 'apiKey', 'headers'], `provider.${id}.options`);
    expect(provider.options.baseURL).toBe(`${GATEWAY}/v1`);
    expect(provider.options.apiKey).toMatch(/^\{env:[A-Z_][A-Z0-9_]*\}$/);
    const [providerId, ...model] = opencode.model.split('/');
    expect(providerId).toBe(id);
    expect(Object.keys(provider.models)).toContain(model.join('/'));
  });

  it('pi: models.json providers.gateway with the chat API, a key variable and models with ids', () => {
    expectOnlyKeys(pi, ['providers'], 'models.json');
    const provider = pi.providers.gateway;
    expectOnlyKeys(provider, ['baseUrl', 'api', 'apiKey', 'headers', 'authHeader', 'models', 'modelOverrides'], 'providers.gateway');
    expect(provider.baseUrl).toBe(`${GATEWAY}/v1`);
    expect(['openai-completions', 'openai-responses', 'anthropic-messages', 'google-generative-ai']).toContain(provider.api);
    expect(provider.apiKey).toMatch(ENV_NAME);
    expect(provider.models.length).toBeGreaterThan(0);
    for (const m of provider.models) {
      expectOnlyKeys(m, ['id', 'name', 'api', 'reasoning', 'input', 'contextWindow', 'maxTokens', 'cost', 'compat'], 'a model');
      expect(typeof m.id).toBe('string');
    }
  });

  it('Qwen Code: OPENAI_BASE_URL on the gateway, in .env syntax', () => {
    expectOnlyKeys(qwen, ['OPENAI_BASE_URL', 'OPENAI_MODEL', 'OPENAI_API_KEY'], 'qwen-code/.env');
    expect(qwen.OPENAI_BASE_URL).toBe(`${GATEWAY}/v1`);
  });

  it('Aider: .aider.conf.yml with openai-api-base on the gateway and an openai/ model, same as the flags in docs/agents.md', () => {
    expectOnlyKeys(aider, ['openai-api-base', 'openai-api-key', 'model'], '.aider.conf.yml');
    expect(aider['openai-api-base']).toBe(`${GATEWAY}/v1`);
    expect(aider.model).toMatch(/^openai\//);
    expect(AGENTS_DOC).toContain(`aider --openai-api-base ${aider['openai-api-base']} --model ${aider.model}`);
  });

  it('OpenAI SDKs: base_url / baseURL on the gateway; the Python snippet parses', () => {
    expect(pythonSdk).toContain(`base_url="${GATEWAY}/v1"`);
    expect(nodeSdk).toContain(`baseURL: '${GATEWAY}/v1'`);
    const python = spawnSync('python3', ['-c', 'import ast, sys; ast.parse(sys.stdin.read())'], { input: pythonSdk, encoding: 'utf8' });
    expect(python.error, 'python3 is on every machine of this kind').toBeUndefined();
    expect(python.status, python.stderr).toBe(0);
  });
});

describe('agent snippets: the URL each agent builds reaches the gateway', () => {
  let upstream: FakeUpstream;
  let gateway: TestGateway;
  /** The snippet's gateway address, moved to the test gateway's port. */
  const here = (url: string) => url.replace(GATEWAY, gateway.origin);

  beforeAll(async () => {
    // A chat request is refused as too large until the gateway replays it compacted (the replay
    // carries x-gateway-compaction); every other path answers 200 and is recorded.
    upstream = await startFakeUpstream((req, res) => {
      if (req.url.endsWith('/chat/completions') && !req.headers['x-gateway-compaction']) {
        res.writeHead(413, { 'content-type': 'text/html', 'content-length': Buffer.byteLength(NGINX_413) });
        return void res.end(NGINX_413);
      }
      return json(res, 200, req.url.endsWith('/chat/completions') ? completion('rescued') : { ok: true, path: req.url });
    });
    // Every agent's request is rescued on its own: memory would send the next ones compacted ahead.
    gateway = await startGateway({ upstream: { url: upstream.baseUrl }, compaction: { strategy: 'fallback' }, memory: { enabled: false } });
  });
  afterAll(async () => {
    await gateway?.close();
    await upstream?.close();
  });

  async function rescuedChat(url: string, headers: Record<string, string>) {
    const res = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify(agentRequest(30)),
    });
    expect(res.status).toBe(200);
    expect(parseCompactionHeader(res.headers.get('x-gateway-compaction'))).toMatchObject({ outcome: 'replayed' });
    const last = upstream.received.at(-1)!;
    expect(last.url).toBe('/v1/chat/completions');
    return last;
  }

  it.each([
    [
      'opencode (@ai-sdk/openai-compatible appends /chat/completions)',
      () => `${opencode.provider.gateway.options.baseURL}/chat/completions`,
    ],
    ['pi (openai-completions)', () => `${pi.providers.gateway.baseUrl}/chat/completions`],
    ['Qwen Code', () => `${qwen.OPENAI_BASE_URL}/chat/completions`],
    ['Aider (LiteLLM, openai/ models)', () => `${aider['openai-api-base']}/chat/completions`],
    ['the Python SDK', () => `${/base_url="([^"]+)"/.exec(pythonSdk)![1]}/chat/completions`],
  ])('%s: a chat request is rescued', async (_agent, url) => {
    const received = await rescuedChat(here(url()), { authorization: 'Bearer sk-agent' });
    expect(received.headers.authorization).toBe('Bearer sk-agent');
  });

  it("the Node SDK with the snippet's baseURL: a chat request is rescued", async () => {
    const baseURL = /baseURL: '([^']+)'/.exec(nodeSdk)![1];
    const client = new OpenAI({ baseURL: here(baseURL), apiKey: 'sk-agent', maxRetries: 0 });
    const { data, response } = await client.chat.completions.create(agentRequest(30) as any).withResponse();
    expect(data.choices[0].message.content).toBe('rescued');
    expect(response.headers.get('x-gateway-compaction')).toMatch(/outcome=replayed/);
  });

  it('Codex (wire_api = "responses"): POST base_url/responses reaches the upstream\'s /v1/responses with its key', async () => {
    const provider = codex.model_providers.gateway;
    const res = await fetch(here(`${provider.base_url}/responses`), {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: 'Bearer sk-codex' },
      body: JSON.stringify({ model: 'gpt-5-codex', input: 'hello', stream: false }),
    });
    expect(res.status).toBe(200);
    const last = upstream.received.at(-1)!;
    expect(last.url).toBe('/v1/responses');
    expect(last.headers.authorization).toBe('Bearer sk-codex');
  });

  it("Claude Code: ANTHROPIC_BASE_URL + /v1/messages reaches the upstream's /v1/messages, x-api-key forwarded", async () => {
    const res = await fetch(here(`${claude.env.ANTHROPIC_BASE_URL}/v1/messages`), {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': 'sk-ant-claude', 'anthropic-version': '2023-06-01' },
      body: JSON.stringify({ model: 'claude-sonnet-4-5', max_tokens: 16, messages: [{ role: 'user', content: 'hello' }] }),
    });
    expect(res.status).toBe(200);
    const last = upstream.received.at(-1)!;
    expect(last.url).toBe('/v1/messages');
    expect(last.headers['x-api-key']).toBe('sk-ant-claude');
    expect(last.headers['anthropic-version']).toBe('2023-06-01');
  });

  it('Gemini CLI: GOOGLE_GEMINI_BASE_URL + /v1beta/models/{model}:streamGenerateContent reaches the upstream\u2019s same path, x-goog-api-key forwarded', async () => {
    // A Gemini upstream's base URL is its origin (https://generativelanguage.googleapis.com).
    const forGemini = await startGateway({ upstream: { url: upstream.origin }, memory: { enabled: false } });
    try {
      const res = await fetch(
        `${geminiEnv.GOOGLE_GEMINI_BASE_URL.replace(GATEWAY, forGemini.origin)}/v1beta/models/gemini-3.1-pro-preview:streamGenerateContent?alt=sse`,
        {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-goog-api-key': 'gemini-key' },
          body: JSON.stringify({ contents: [{ role: 'user', parts: [{ text: 'hello' }] }] }),
        },
      );
      expect(res.status).toBe(200);
      await res.arrayBuffer();
      const last = upstream.received.at(-1)!;
      expect(last.url).toBe('/v1beta/models/gemini-3.1-pro-preview:streamGenerateContent?alt=sse');
      expect(last.headers['x-goog-api-key']).toBe('gemini-key');
    } finally {
      await forGemini.close();
    }
  });
});
