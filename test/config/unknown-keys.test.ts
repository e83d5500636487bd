import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig, validateConfig } from '../../src/config/load.js';
import { runGateway, type Proc } from '../helpers/process.js';

// Unknown keys, one line each, at their real paths, with the key probably meant. Two unknown
// keys at one level used to print as one made-up path (`upstream.api_key.base_url: ...`).

function problems(fn: () => unknown): string[] {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as ConfigError).problems;
  }
  throw new Error('expected a ConfigError');
}

let proc: Proc | undefined;
afterEach(() => {
  proc?.child.kill('SIGKILL');
  proc = undefined;
});

describe('unknown keys', () => {
  it('the built process prints one line per unknown key with its path and "did you mean", and exits 2', async () => {
    const path = join(mkdtempSync(join(tmpdir(), 'gw-keys-')), 'gw.yaml');
    writeFileSync(path, 'upstream:\n  api_key: sk-snake-case\n  base_url: http://127.0.0.1:9/v1\nserver:\n  prot: 9000\n');
    proc = runGateway(['--config', path], { PORT: '0' });
    expect(await proc.exitWithin(10_000)).toMatchObject({ code: 2 });
    const lines = proc.output().split('\n');
    expect(lines).toContain('compaction-gateway: invalid configuration: upstream.api_key: unknown key; did you mean apiKey?');
    expect(lines).toContain('compaction-gateway: invalid configuration: upstream.base_url: unknown key; did you mean url?');
    expect(lines).toContain('compaction-gateway: invalid configuration: server.prot: unknown key; did you mean port?');
    expect(proc.output()).not.toMatch(/api_key\.base_url|sk-snake-case/);
  });

  it.each([
    [{ upstream: { apiKEY: 'k' } }, 'upstream.apiKEY: unknown key; did you mean apiKey?'],
    [{ upstream: { 'api-key': 'k' } }, 'upstream.api-key: unknown key; did you mean apiKey?'],
    [{ memory: { redis_url: 'redis://r' } }, 'memory.redis_url: unknown key; did you mean redisUrl?'],
    [{ summarizer: { timeout: 5 } }, 'summarizer.timeout: unknown key; did you mean timeoutMs?'],
    [{ compaction: { keep_recent: 4 } }, 'compaction.keep_recent: unknown key; did you mean keepRecent?'],
    [{ port: 9000 }, 'port: unknown key; did you mean server.port?'],
    [{ api_key: 'k' }, 'api_key: unknown key; did you mean upstream.apiKey or summarizer.apiKey?'],
    [{ log: { colour: true } }, 'log.colour: unknown key'],
  ])('%j: %s', (input, line) => {
    expect(problems(() => validateConfig(input))).toEqual([line]);
  });

  it('lists unknown keys beside bad values, every one on its own line', () => {
    const path = join(mkdtempSync(join(tmpdir(), 'gw-keys-')), 'gw.yaml');
    writeFileSync(path, 'server:\n  port: 70000\n  hots: x\n  prot: 1\ncolour: blue\n');
    const list = problems(() => loadConfig(['--config', path], {}));
    expect(list).toEqual(
      expect.arrayContaining([
        'server.hots: unknown key; did you mean host?',
        'server.prot: unknown key; did you mean port?',
        'colour: unknown key',
      ]),
    );
    expect(list.find((p) => p.startsWith('server.port (or PORT):'))).toMatch(/got 70000/);
    expect(list).toHaveLength(4);
  });
});
