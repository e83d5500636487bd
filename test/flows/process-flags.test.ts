import { readFileSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { runGateway, type Proc } from '../helpers/process.js';

// The built process's command line: flags that exist do what they say and exit; anything else
// is refused with the list, instead of a server silently starting on the default port.

const VERSION = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')).version;

let proc: Proc | undefined;
afterEach(() => {
  proc?.child.kill('SIGKILL');
  proc = undefined;
});

describe('the command line', () => {
  it('--help prints the flags and the environment variables, and exits 0', async () => {
    proc = runGateway(['--help'], { PORT: '0' });
    expect((await proc.exitWithin(10_000)) as { code: number }).toMatchObject({ code: 0 });
    expect(proc.output()).toMatch(/usage: compaction-gateway/);
    expect(proc.output()).toMatch(/--config FILE/);
    expect(proc.output()).toMatch(/UPSTREAM_URL/);
    expect(proc.output()).not.toMatch(/Server listening/);
  });

  it('--version prints the package version and exits 0', async () => {
    proc = runGateway(['--version'], { PORT: '0' });
    expect((await proc.exitWithin(10_000)) as { code: number }).toMatchObject({ code: 0 });
    expect(proc.output().trim()).toBe(`compaction-gateway ${VERSION}`);
  });

  it.each([[['--port', '9000']], [['--config']], [['serve']]])('%j exits 2 naming the argument and listing the flags', async (args) => {
    proc = runGateway(args, { PORT: '0' });
    expect((await proc.exitWithin(10_000)) as { code: number }).toMatchObject({ code: 2 });
    expect(proc.output()).toMatch(/--config FILE, --check, --help, --version/);
    expect(proc.output()).toContain(args[0]);
    expect(proc.output()).not.toMatch(/Server listening/);
  });

  it('a config error names the key, the environment variable and the bad value, with secrets masked', async () => {
    proc = runGateway([], {
      PORT: 'eighty',
      LOG_FORMAT: 'fancy',
      MEMORY_REDIS_URL: 'http://admin:hunter2@cache:6379',
      UPSTREAM_URL: 'ftp://sk-in-the-url@example.com/v1',
    });
    expect((await proc.exitWithin(10_000)) as { code: number }).toMatchObject({ code: 2 });
    const out = proc.output();
    expect(out).toMatch(/server\.port \(from PORT\): .*got "eighty"/);
    expect(out).toMatch(/log\.format \(from LOG_FORMAT\): .*got "fancy"/);
    // A URL without its credentials (and query), what could be a key never.
    expect(out).toMatch(/memory\.redisUrl \(from MEMORY_REDIS_URL\): must be a redis:\/\/ .*got "http:\/\/cache:6379\/"/);
    expect(out).toMatch(/upstream\.url \(from UPSTREAM_URL\): .*got "ftp:\/\/example.com\/v1"/);
    expect(out).not.toMatch(/hunter2|sk-in-the-url/);
  });
});
