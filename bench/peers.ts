import { execFileSync, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { request } from 'undici';
import { procStats } from './dist-gateway.js';
import { stopOnExit, type BenchProcess } from './procs.js';
import { freePort } from '../test/helpers/ports.js';

/*
 * The peers `npm run bench` runs beside the gateway when they are installed here: nginx and
 * HAProxy (Debian: `apt-get install -y nginx haproxy`), each in the foreground with its config,
 * pid and temporary files in a directory of its own (the system's services are not involved),
 * one worker, keep-alive connections to the fake upstream, no buffering of bodies where the
 * proxy can stream them, and no access log (as ../shared/peer-bench runs nginx); and Portkey's
 * gateway, from bench/portkey/node_modules (`npm run bench:peers`; no dependency of the gateway).
 * Their CPU time is the process tree's, from /proc.
 */

export type Peer = 'nginx' | 'haproxy' | 'portkey';
export const PEERS: Peer[] = ['nginx', 'haproxy', 'portkey'];

const PORTKEY_DIR = fileURLToPath(new URL('portkey/', import.meta.url));
const PORTKEY_ENTRY = join(PORTKEY_DIR, 'node_modules/@portkey-ai/gateway/build/start-server.js');

export interface PeerStart {
  proc: BenchProcess | null;
  /** Why it did not run, when it did not. */
  skipped?: string;
  version?: string;
}

export async function startPeer(peer: Peer, upstream: string): Promise<PeerStart> {
  const binary = peer === 'portkey' ? (existsSync(PORTKEY_ENTRY) ? process.execPath : null) : which(peer);
  if (!binary)
    return {
      proc: null,
      skipped:
        peer === 'portkey'
          ? "Portkey's gateway is not installed (npm run bench:peers installs @portkey-ai/gateway into bench/portkey)"
          : `${peer} is not installed (Debian: apt-get install -y ${peer})`,
    };
  const dir = mkdtempSync(join(tmpdir(), `bench-${peer}-`));
  const port = await freePort();
  const up = new URL(upstream);
  let child: ChildProcess;
  // Portkey is pointed at the fake upstream per request (x-portkey-custom-host; it appends
  // /chat/completions); loopback is in its default TRUSTED_CUSTOM_HOSTS.
  const headers = peer === 'portkey' ? { 'x-portkey-provider': 'openai', 'x-portkey-custom-host': `${upstream}/v1` } : undefined;
  if (peer === 'portkey') {
    child = spawn(binary, [PORTKEY_ENTRY, `--port=${port}`, '--headless'], {
      cwd: dir,
      env: { PATH: process.env.PATH, NODE_ENV: 'production' },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
  } else if (peer === 'nginx') {
    mkdirSync(join(dir, 'tmp'));
    writeFileSync(join(dir, 'nginx.conf'), nginxConf(dir, port, up.host));
    child = spawn(binary, ['-p', dir, '-c', join(dir, 'nginx.conf'), '-e', join(dir, 'error.log')], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
  } else {
    writeFileSync(join(dir, 'haproxy.cfg'), haproxyConf(port, up.host));
    child = spawn(binary, ['-db', '-f', join(dir, 'haproxy.cfg')], { stdio: ['ignore', 'ignore', 'pipe'] });
  }
  let stderr = '';
  child.stderr!.on('data', (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-2000)));
  const origin = `http://127.0.0.1:${port}`;
  const stop = stopOnExit(async () => {
    if (child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill(peer === 'nginx' ? 'SIGQUIT' : peer === 'haproxy' ? 'SIGUSR1' : 'SIGTERM');
      await Promise.race([exited, sleep(5_000)]);
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    }
    rmSync(dir, { recursive: true, force: true });
  });
  for (let i = 0; ; i++) {
    try {
      const res = await request(`${origin}/v1/models`, { headers });
      await res.body.arrayBuffer();
      if (res.statusCode === 200) break;
    } catch {
      // not listening yet
    }
    if (child.exitCode !== null || i > 200) {
      await stop();
      return { proc: null, skipped: `${peer} did not start: ${stderr.trim().split('\n').at(-1) ?? ''}` };
    }
    await sleep(50);
  }
  return {
    proc: {
      name: peer,
      origin,
      headers,
      pid: child.pid!,
      stats: async () => treeStats(child.pid!),
      profile: () => Promise.reject(new Error(`${peer}: no profiler`)),
      stop,
    },
    version: peer === 'portkey' ? portkeyVersion() : versionOf(binary, peer),
  };
}

function nginxConf(dir: string, port: number, upstream: string): string {
  return `daemon off;
master_process on;
worker_processes 1;
pid ${join(dir, 'nginx.pid')};
error_log ${join(dir, 'error.log')} warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path ${join(dir, 'tmp')};
  proxy_temp_path ${join(dir, 'tmp')};
  fastcgi_temp_path ${join(dir, 'tmp')};
  uwsgi_temp_path ${join(dir, 'tmp')};
  scgi_temp_path ${join(dir, 'tmp')};
  client_max_body_size 64m;
  keepalive_requests 100000;
  upstream fake { server ${upstream}; keepalive 128; keepalive_requests 100000; }
  server {
    listen 127.0.0.1:${port};
    location / {
      proxy_pass http://fake;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
      proxy_request_buffering off;
    }
  }
}
`;
}

function haproxyConf(port: number, upstream: string): string {
  return `global
  nbthread 1
  maxconn 4096
defaults
  mode http
  timeout connect 5s
  timeout client 60s
  timeout server 60s
  http-reuse always
  option http-no-delay
frontend in
  bind 127.0.0.1:${port}
  default_backend fake
backend fake
  server fake ${upstream}
`;
}

/** CPU time and memory of a process and its children (nginx's master and worker). */
function treeStats(pid: number): ReturnType<typeof procStats> {
  const total = procStats(pid);
  for (const child of childrenOf(pid)) {
    try {
      const s = procStats(child);
      total.cpuMs += s.cpuMs;
      total.rssBytes += s.rssBytes;
      total.maxRssBytes += s.maxRssBytes;
    } catch {
      // gone meanwhile
    }
  }
  return total;
}

function childrenOf(pid: number): number[] {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

function portkeyVersion(): string {
  const read = (name: string) =>
    (JSON.parse(readFileSync(join(PORTKEY_DIR, 'node_modules', name, 'package.json'), 'utf8')) as { version: string }).version;
  return `Portkey's gateway ${read('@portkey-ai/gateway')} (@hono/node-server ${read('@hono/node-server')}, Node ${process.versions.node})`;
}

function which(peer: Peer): string | null {
  for (const dir of ['/usr/sbin', '/usr/local/sbin', '/usr/bin', '/usr/local/bin']) {
    try {
      execFileSync(join(dir, peer), ['-v'], { stdio: 'ignore' });
      return join(dir, peer);
    } catch {
      // not there
    }
  }
  return null;
}

function versionOf(binary: string, peer: Peer): string {
  // nginx prints its version on stderr, HAProxy on stdout.
  const run = spawnSync(binary, ['-v'], { encoding: 'utf8' });
  return (`${run.stdout ?? ''}${run.stderr ?? ''}`.trim().split('\n')[0] || peer).trim();
}
