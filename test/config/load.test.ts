import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config/load.js';

function file(text: string, name = 'gw.yaml'): string {
  const path = join(mkdtempSync(join(tmpdir(), 'gw-config-')), name);
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

describe('loadConfig', () => {
  it('has working defaults', () => {
    const config = loadConfig([], {});
    expect(config.server).toMatchObject({ host: '127.0.0.1', port: 8080, bodyLimitBytes: 64 * 1024 * 1024 });
    expect(config.upstream.url).toBeUndefined();
    expect(config.upstreams).toBeUndefined();
    expect(Object.isFrozen(config.upstream)).toBe(true);
  });

  it('the summarizer\u2019s window, its summary size and masking from the environment', () => {
    const config = loadConfig([], { SUMMARIZER_MAX_INPUT_TOKENS: '6000', SUMMARIZER_MAX_SUMMARY_TOKENS: '300', COMPACTION_MASK: 'off' });
    expect(config.summarizer).toMatchObject({ maxInputTokens: 6_000, maxSummaryTokens: 300 });
    expect(config.compaction.mask).toBe(false);
    expect(loadConfig([], {}).compaction.mask).toBe(true);
    expect(problems(() => loadConfig([], { SUMMARIZER_MAX_INPUT_TOKENS: 'lots' })).join('\n')).toMatch(
      /summarizer\.maxInputTokens \(from SUMMARIZER_MAX_INPUT_TOKENS\)/,
    );
  });

  it('layers defaults < file < environment', () => {
    const path = file('server:\n  port: 9000\n  host: 0.0.0.0\nupstream:\n  url: http://localhost:11434/v1\n');
    const config = loadConfig(['--config', path], { PORT: '9100', GATEWAY_API_KEYS: ' a , b ,', UPSTREAM_API_KEY: 'k' });
    expect(config.server.port).toBe(9100);
    expect(config.server.host).toBe('0.0.0.0');
    expect(config.upstream.url).toBe('http://localhost:11434/v1');
    expect(config.auth.keys).toEqual(['a', 'b']);
    expect(loadConfig([], { CONFIG: path }).server.port).toBe(9000);
  });

  it('reads JSON config files too', () => {
    const path = file('{"upstream": {"url": "https://api.groq.com/openai/v1"}}', 'gw.json');
    expect(loadConfig([`--config=${path}`], {}).upstream.url).toBe('https://api.groq.com/openai/v1');
  });

  it('rejects unknown keys and bad values, naming every one', () => {
    const path = file('server:\n  port: 70000\n  prot: 1\nupstream:\n  url: ftp://x\ncolour: blue\n');
    const list = problems(() => loadConfig(['--config', path], { LOG_LEVEL: 'loud' }));
    const text = list.join('\n');
    expect(text).toMatch(/server\.port/);
    expect(text).toMatch(/server\.prot/);
    expect(text).toMatch(/upstream\.url/);
    expect(text).toMatch(/colour/);
    expect(text).toMatch(/log\.level \(from LOG_LEVEL\)/);
    expect(list.length).toBeGreaterThanOrEqual(5);
  });

  it('names the environment variable of a bad value', () => {
    expect(problems(() => loadConfig([], { PORT: 'eighty' })).join()).toMatch(/server\.port \(from PORT\)/);
  });

  it('refuses gateway keys without an upstream key (the gateway key is never forwarded)', () => {
    expect(problems(() => loadConfig([], { GATEWAY_API_KEYS: 'a' })).join()).toMatch(
      /upstream\.apiKey \(or UPSTREAM_API_KEY\): is required when auth\.keys is set/,
    );
  });

  it('reports an unreadable or malformed file', () => {
    expect(problems(() => loadConfig(['--config', '/nonexistent/gw.yaml'], {})).join()).toMatch(/nonexistent/);
    expect(problems(() => loadConfig(['--config', file('a: [1, 2')], {})).join()).toMatch(/not valid YAML/);
  });

  it('shows the bad value after each problem, but never a key or a password', () => {
    const list = problems(() =>
      loadConfig(['--config', file('upstream:\n  apiKey: 12345678\nauth:\n  keys: [7]\nserver:\n  port: 70000\n')], {
        SUMMARIZER_URL: 'https://user:pa55word@llm.example/v1?key=sk-query',
        SUMMARIZER_TIMEOUT_MS: '-5',
      }),
    ).join('\n');
    expect(list).toMatch(/upstream\.apiKey \(or UPSTREAM_API_KEY\): .*; got \[redacted\]/);
    expect(list).toMatch(/auth\.keys\.0: .*; got \[redacted\]/);
    expect(list).toMatch(/server\.port \(or PORT\): .*; got 70000/);
    expect(list).toMatch(/summarizer\.timeoutMs \(from SUMMARIZER_TIMEOUT_MS\): .*; got -5/);
    expect(list).not.toMatch(/12345678|pa55word|sk-query/);
  });
});

describe('a bad config never prints a value that could be a key', () => {
  const KEY = `sk-proj-${'Zq7'.repeat(16)}`;

  it('a key pasted into UPSTREAM_URL', () => {
    const list = problems(() => loadConfig([], { UPSTREAM_URL: KEY })).join('\n');
    expect(list).toMatch(/upstream\.url \(from UPSTREAM_URL\)/);
    expect(list).not.toContain('Zq7');
  });

  it('a key variable used in the wrong field, however short the key', () => {
    const yaml = 'log:\n  level: ${GATEWAY_API_KEYS}\nserver:\n  port: ${UPSTREAM_API_KEY}\nupstream:\n  url: ${SUMMARIZER_API_KEY}\n';
    const list = problems(() =>
      loadConfig(['--config', file(yaml)], { UPSTREAM_API_KEY: KEY, GATEWAY_API_KEYS: 'gw-1', SUMMARIZER_API_KEY: 'k9' }),
    ).join('\n');
    expect(list).toMatch(/log\.level \(from \$\{GATEWAY_API_KEYS\}\)/);
    expect(list).toMatch(/server\.port \(from \$\{UPSTREAM_API_KEY\}\)/);
    expect(list).toMatch(/upstream\.url \(from \$\{SUMMARIZER_API_KEY\}\)/);
    expect(list).not.toMatch(/Zq7|gw-1|"k9"/);
  });

  it('a credentialed OTLP endpoint that does not parse', () => {
    const list = problems(() => loadConfig([], { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:s3cr3t-token@otel:43x8/' })).join('\n');
    expect(list).toMatch(/telemetry\.otlpEndpoint \(from OTEL_EXPORTER_OTLP_ENDPOINT\)/);
    expect(list).not.toContain('s3cr3t');
  });

  it('a key in a line the YAML parser quotes', () => {
    const list = problems(() => loadConfig(['--config', file(`upstream:\n  apiKey: ${KEY}: oops\n`)], {})).join('\n');
    expect(list).toMatch(/not valid YAML\/JSON: .*line 2, column/);
    expect(list).not.toContain('Zq7');
  });

  it('a long value in any other field is described, not shown', () => {
    const list = problems(() => loadConfig([], { LOG_LEVEL: KEY })).join('\n');
    expect(list).toMatch(/log\.level \(from LOG_LEVEL\): .*; got a string of 56 characters/);
    expect(list).not.toContain('Zq7');
  });

  it('what helps and cannot be a key is still shown: a word, a number, a URL without its credentials and query', () => {
    const list = problems(() =>
      loadConfig([], { LOG_LEVEL: 'loud', PORT: '70000', UPSTREAM_URL: 'ftp://user:pw@files.example/v1?key=abc' }),
    ).join('\n');
    expect(list).toMatch(/log\.level \(from LOG_LEVEL\): .*; got "loud"/);
    expect(list).toMatch(/server\.port \(from PORT\): .*; got 70000/);
    expect(list).toMatch(/upstream\.url \(from UPSTREAM_URL\): .*; got "ftp:\/\/files\.example\/v1"/);
    expect(list).not.toMatch(/pw|key=abc/);
  });
});
