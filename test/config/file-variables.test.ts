import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { afterEach, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config/load.js';
import { startFakeUpstream, type FakeUpstream } from '../helpers/fake-upstream.js';
import { jsonLines, listening, runGateway, type Proc } from '../helpers/process.js';

// `${VAR}` and `${VAR:-default}` in a config file's string values come from the environment;
// they used to be taken literally (`apiKey: ${OPENAI_API_KEY}` sent "${OPENAI_API_KEY}" upstream).

function file(text: string, name = 'gw.yaml'): string {
  const path = join(mkdtempSync(join(tmpdir(), 'gw-vars-')), name);
  writeFileSync(path, text);
  return path;
}

function problems(fn: () => unknown): string[] {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as ConfigError).problems;
  }
  throw new Error('expected a ConfigError');
}

const load = (text: string, env: Record<string, string> = {}) => loadConfig(['--config', file(text)], env);

let proc: Proc | undefined;
let upstream: FakeUpstream | undefined;
afterEach(async () => {
  proc?.child.kill('SIGKILL');
  await upstream?.close();
  proc = upstream = undefined;
});

describe('variables in the config file, through the built process', () => {
  it('expands the upstream, its key and a numeric port; the provider sees the real key', async () => {
    upstream = await startFakeUpstream();
    const config = file(
      [
        'server:',
        '  port: ${GW_PORT:-0}',
        'upstream:',
        '  url: ${PROVIDER_ORIGIN}/v1',
        '  apiKey: ${MY_PROVIDER_KEY}',
        'compaction:',
        '  strategy: ${STRATEGY:-fallback}',
        '',
      ].join('\n'),
    );
    proc = runGateway(['--config', config], { PROVIDER_ORIGIN: upstream.origin, MY_PROVIDER_KEY: 'sk-from-the-environment' });
    const origin = await listening(proc);
    await expect
      .poll(() => jsonLines(proc!).find((l) => l.msg === 'gateway ready'), { timeout: 10_000 })
      .toMatchObject({
        upstreams: [expect.objectContaining({ name: 'default', url: upstream.baseUrl, key: "the gateway's own (upstream.apiKey)" })],
        compaction: 'fallback',
      });
    const sdk = new OpenAI({ baseURL: `${origin}/v1`, apiKey: 'placeholder', maxRetries: 0, timeout: 10_000 });
    await sdk.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'hi' }] });
    expect(upstream.received).toHaveLength(1);
    expect(upstream.received[0].headers.authorization).toBe('Bearer sk-from-the-environment');
    expect(proc.output()).not.toContain('sk-from-the-environment');
  });

  it('an unset variable without a default: exit 2 naming the variable and the key', async () => {
    const config = file('upstream:\n  apiKey: ${OPENAI_API_KEY}\n');
    proc = runGateway(['--config', config], { PORT: '0' });
    expect(await proc.exitWithin(10_000)).toMatchObject({ code: 2 });
    expect(proc.output()).toMatch(/upstream\.apiKey: \$\{OPENAI_API_KEY\}: the environment variable OPENAI_API_KEY is not set/);
    expect(proc.output()).not.toMatch(/Server listening/);
  });
});

describe('variables in the config file', () => {
  it('takes the default when the variable is unset or empty, the value when it is set', () => {
    const text = 'upstream:\n  url: ${UP:-http://127.0.0.1:11434/v1}\n';
    expect(load(text).upstream.url).toBe('http://127.0.0.1:11434/v1');
    expect(load(text, { UP: '' }).upstream.url).toBe('http://127.0.0.1:11434/v1');
    expect(load(text, { UP: 'https://api.groq.com/openai/v1' }).upstream.url).toBe('https://api.groq.com/openai/v1');
  });

  it('expands inside a longer string, several at once, and in list items', () => {
    const config = load('upstream:\n  url: http://${H}:${P:-8000}/v1\n  apiKey: k\nauth:\n  keys: ["${A}", "fixed", "x-${B}"]\n', {
      H: 'llm.internal',
      A: 'ka',
      B: 'kb',
    });
    expect(config.upstream.url).toBe('http://llm.internal:8000/v1');
    expect(config.auth.keys).toEqual(['ka', 'fixed', 'x-kb']);
  });

  it('reads a whole reference as the key wants it: a number, a boolean, a comma-separated list', () => {
    const config = load(
      'server:\n  port: ${P}\ncompaction:\n  proactive: ${PRO}\n  targetRatio: ${R}\nupstream:\n  apiKey: k\nauth:\n  keys: ${KEYS}\n',
      {
        P: '9100',
        PRO: 'off',
        R: '0.4',
        KEYS: 'a, b',
      },
    );
    expect(config.server.port).toBe(9100);
    expect(config.compaction.proactive).toBe(false);
    expect(config.compaction.targetRatio).toBe(0.4);
    expect(config.auth.keys).toEqual(['a', 'b']);
    // Part of a longer string stays a string (an API key of digits stays a string too).
    expect(load('upstream:\n  apiKey: ${K}\n', { K: '12345' }).upstream.apiKey).toBe('12345');
  });

  it('a value that expands to nothing keeps the key\u2019s default', () => {
    expect(load('summarizer:\n  model: ${SUMMARY_MODEL:-}\n').summarizer.model).toBeUndefined();
    expect(load('server:\n  port: ${P:-}\n').server.port).toBe(8080);
  });

  it('$${ is a literal ${; a lone $ or $$ is left as written', () => {
    const config = load('summarizer:\n  prompt: "keep $${NAME} and ${X:-y} as $$ and $HOME"\n');
    expect(config.summarizer.prompt).toBe('keep ${NAME} and y as $$ and $HOME');
  });

  it('the environment wins: a key set by its variable does not need the file\u2019s reference', () => {
    expect(load('upstream:\n  apiKey: ${NOT_SET}\n', { UPSTREAM_API_KEY: 'from-env' }).upstream.apiKey).toBe('from-env');
  });

  it('names every unset variable with its key path, never a default\u2019s text', () => {
    const list = problems(() => load('upstream:\n  apiKey: ${KEY_ONE}\nsummarizer:\n  apiKey: ${KEY_TWO}\n  url: ${S:-https://x}\n'));
    expect(list).toHaveLength(2);
    expect(list[0]).toMatch(
      /gw\.yaml: upstream\.apiKey: \$\{KEY_ONE\}: the environment variable KEY_ONE is not set \(give a default with \$\{KEY_ONE:-value\}\)$/,
    );
    expect(list[1]).toMatch(/summarizer\.apiKey: \$\{KEY_TWO\}: .*KEY_TWO is not set/);
  });

  it('refuses a reference it cannot read, rather than taking it literally', () => {
    expect(problems(() => load('summarizer:\n  prompt: "a ${OPEN"\n')).join()).toMatch(
      /summarizer\.prompt: a "\$\{" without its closing "\}" \(write "\$\$\{" for a literal/,
    );
    expect(problems(() => load('summarizer:\n  prompt: "${not a name}"\n')).join()).toMatch(
      /summarizer\.prompt: "\$\{not a name\}" does not name a variable/,
    );
  });

  it('a bad expanded value is reported against its key and its variable', () => {
    expect(problems(() => load('server:\n  port: ${GW_PORT}\n', { GW_PORT: 'eighty' })).join()).toMatch(
      /server\.port \(from \$\{GW_PORT\}\): .*got "eighty"/,
    );
  });

  it('works in JSON files too', () => {
    const path = file('{"upstream": {"url": "${U}"}}', 'gw.json');
    expect(loadConfig([`--config=${path}`], { U: 'https://api.groq.com/openai/v1' }).upstream.url).toBe('https://api.groq.com/openai/v1');
  });
});
