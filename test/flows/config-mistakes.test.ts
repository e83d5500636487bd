import { mkdtempSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { freePort } from '../helpers/ports.js';
import { portOpen, runGateway, type Proc } from '../helpers/process.js';

// The built process's answer to a config it cannot start with: one line per mistake naming the
// key and its variable, exit 2, never a stack trace; `--check` says the same without listening.

let proc: Proc | undefined;
let holder: Server | undefined;
afterEach(async () => {
  proc?.child.kill('SIGKILL');
  await new Promise<void>((resolve) => (holder ? holder.close(() => resolve()) : resolve()));
  proc = holder = undefined;
});

function file(text: string): string {
  const path = join(mkdtempSync(join(tmpdir(), 'gw-mistakes-')), 'gw.yaml');
  writeFileSync(path, text);
  return path;
}

async function refused(args: string[], env: Record<string, string>, code = 2): Promise<string[]> {
  proc = runGateway(args, { PORT: '0', ...env });
  expect(await proc.exitWithin(10_000)).toMatchObject({ code });
  const out = proc.output();
  expect(out).not.toMatch(/\n\s+at |TypeError|Server listening/);
  return out.split('\n').filter(Boolean);
}

const TWO = 'upstreams:\n  openai: { url: "https://api.openai.com/v1" }\n  local: { url: "http://127.0.0.1:9/v1", apis: [chat] }\n';

describe('a config the gateway cannot start with', () => {
  it.each([
    [
      'a named upstream URL without its scheme',
      'upstreams:\n  anthropic: { url: api.anthropic.com/v1 }\n',
      {},
      'upstreams.anthropic.url: must be an http:// or https:// URL; got "api.anthropic.com/v1"',
    ],
    [
      'an empty named upstream URL',
      'upstreams:\n  anthropic: { url: "" }\n',
      {},
      'upstreams.anthropic.url: must be an http:// or https:// URL; got ""',
    ],
    [
      'UPSTREAM_URL without its scheme beside upstreams',
      TWO,
      { UPSTREAM_URL: 'localhost:11434/v1' },
      'upstream.url (from UPSTREAM_URL): must be an http:// or https:// URL; got "localhost:11434/v1"',
    ],
    [
      'gateway keys without the provider key',
      '{}',
      { GATEWAY_API_KEYS: 'k1' },
      'upstream.apiKey (or UPSTREAM_API_KEY): is required when auth.keys is set (the gateway key is not forwarded upstream)',
    ],
    [
      'a proxy variable without its scheme',
      '{}',
      { HTTPS_PROXY: 'user:pw@proxy:3128' },
      'HTTPS_PROXY: must be a proxy URL with no path, such as http://proxy:3128 (traffic to https://api.openai.com goes through it); got "[redacted]@proxy:3128"',
    ],
    [
      'a proxy with a path',
      'upstream:\n  proxy: http://proxy:3128/squid\n',
      {},
      'upstream.proxy (or UPSTREAM_PROXY): must be none, or a proxy URL with no path: http://host:port or https://host:port; got "http://proxy:3128/squid"',
    ],
  ])('%s: one line naming the key, exit 2', async (_what, text, env, line) => {
    const lines = await refused(['--config', file(text)], env);
    expect(lines).toEqual([`compaction-gateway: invalid configuration: ${line}`]);
  });

  it('two mistakes are two lines, and --check says the same', async () => {
    const path = file(`${TWO}  bad: { url: "" }\nlog: { level: loud }\n`);
    const serving = await refused(['--config', path], {});
    expect(serving).toEqual([
      'compaction-gateway: invalid configuration: log.level (or LOG_LEVEL): Invalid option: expected one of "fatal"|"error"|"warn"|"info"|"debug"|"trace"|"silent"; got "loud"',
      'compaction-gateway: invalid configuration: upstreams.bad.url: must be an http:// or https:// URL; got ""',
    ]);
    expect(await refused(['--check', '--config', path], {})).toEqual(serving);
  });

  it('a port in use: one line naming it and PORT, exit 1 (it may free itself), no stack trace', async () => {
    const port = await freePort();
    holder = createServer();
    await new Promise<void>((resolve) => holder!.listen(port, '127.0.0.1', resolve));
    const lines = await refused([], { PORT: String(port) }, 1);
    expect(lines).toEqual([
      `compaction-gateway: cannot listen on 127.0.0.1 port ${port} (server.host HOST, server.port PORT): the port is in use by another process; stop it, or set PORT to a free port`,
    ]);
  });
});

describe('--check', () => {
  it('a config that loads: every upstream resolved, exit 0, never listening', async () => {
    const port = await freePort();
    proc = runGateway(['--check', '--config', file(`${TWO}routes:\n  - { model: "qwen*", upstream: local }\ndefaultUpstream: openai\n`)], {
      PORT: String(port),
    });
    const exit = await proc.exitWithin(10_000);
    expect(exit).toMatchObject({ code: 0 });
    expect(await portOpen(port)).toBe(false);
    const lines = proc.output().split('\n').filter(Boolean);
    expect(lines[0]).toMatch(
      new RegExp(`^compaction-gateway: configuration valid: .*gw\\.yaml; would listen on 127\\.0\\.0\\.1:${port}; default upstream openai`),
    );
    expect(lines).toContain(
      "compaction-gateway: upstream openai: https://api.openai.com/v1 (chat,responses,messages,gemini); key the client's; proxy direct (no HTTPS_PROXY or HTTP_PROXY set); summarizer the request's own upstream, the request's model",
    );
    expect(lines).toContain(
      "compaction-gateway: upstream local: http://127.0.0.1:9/v1 (chat); key the client's; proxy direct (no HTTPS_PROXY or HTTP_PROXY set); summarizer the request's own upstream, the request's model",
    );
    expect(lines).toContain('compaction-gateway: route model qwen* -> local');
    expect(proc.output()).not.toMatch(/Server listening|gateway ready/);
  });

  it('an open gateway is refused by --check as by serving: exit 2, one line', async () => {
    const lines = await refused(['--check'], { HOST: '0.0.0.0', UPSTREAM_API_KEY: 'sk-never-shown' });
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^compaction-gateway: refusing to start an open gateway: .*GATEWAY_ALLOW_OPEN=1/);
    expect(lines[0]).not.toMatch(/sk-never-shown/);
  });
});
