import { execFile, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from './ports.js';

/** Whether a redis-server binary is on PATH (.ci/run installs one from Debian's packages, with redis-cli). */
export const HAVE_REDIS = spawnSync('redis-server', ['--version'], { stdio: 'ignore' }).status === 0;

export interface TestRedis {
  url: string;
  port: number;
  stop(): Promise<void>;
  /** Starts it again on the same port (after stop). */
  start(): Promise<void>;
}

/** Every redis-server of the tests: loopback only, nothing persisted. */
const EPHEMERAL = ['--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'];

/** A redis-server (or sentinel) process, started and waited for until it says `ready`. */
interface RedisProcess {
  port: number;
  stop(): Promise<void>;
  start(): Promise<void>;
}

function redisProcess(port: number, args: string[], ready: RegExp, cwd?: string): RedisProcess {
  let child: ChildProcess | undefined;
  const start = async () => {
    child = spawn('redis-server', args, { stdio: ['ignore', 'pipe', 'pipe'], cwd });
    let output = '';
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`redis-server ${args.join(' ')} did not start: ${output}`)), 10_000);
      child!.stdout!.on('data', (c) => {
        output += c;
        if (ready.test(output)) {
          clearTimeout(timer);
          resolve();
        }
      });
      child!.once('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`redis-server exited with ${code}: ${output}`));
      });
    });
  };
  const stop = async () => {
    // After SIGKILL, exitCode stays null and signalCode is set: either one means it is gone.
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((r) => child!.once('exit', r));
    child.kill('SIGKILL');
    await exited;
  };
  return { port, start, stop };
}

export interface RedisOptions {
  /** Served over TLS only (rediss://), with this certificate and key (PEM files). */
  tls?: { certFile: string; keyFile: string; caFile: string };
  /** An ACL user allowed everything, with this password; the default user is then off. */
  user?: { name: string; password: string };
}

/** A real redis-server of its own on a loopback port, nothing persisted. */
export async function startRedis(options: RedisOptions = {}): Promise<TestRedis> {
  const port = await freePort();
  const tls = options.tls
    ? [
        '--port',
        '0',
        '--tls-port',
        String(port),
        '--tls-cert-file',
        options.tls.certFile,
        '--tls-key-file',
        options.tls.keyFile,
        '--tls-ca-cert-file',
        options.tls.caFile,
        '--tls-auth-clients',
        'no',
      ]
    : ['--port', String(port)];
  const user = options.user
    ? ['--user', options.user.name, 'on', `>${options.user.password}`, '~*', '&*', '+@all', '--user', 'default', 'off']
    : [];
  const server = redisProcess(port, [...tls, ...EPHEMERAL, ...user], /Ready to accept connections/);
  await server.start();
  return { url: `${options.tls ? 'rediss' : 'redis'}://127.0.0.1:${port}`, port, stop: server.stop, start: server.start };
}

/** Runs redis-cli against a port; its output, trimmed. Bounded: 20 s. */
export function redisCli(port: number, ...args: string[]): string {
  const run = spawnSync('redis-cli', ['-h', '127.0.0.1', '-p', String(port), ...args], { encoding: 'utf8', timeout: 20_000 });
  if (run.status !== 0) throw new Error(`redis-cli ${args.join(' ')}: ${run.stderr || run.stdout}`);
  return run.stdout.trim();
}

/**
 * redis-cli without blocking the event loop: what a test runs while in-process gateways serve
 * (a blocked loop would time their Redis commands out).
 */
export function redisCliAsync(port: number, ...args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile('redis-cli', ['-h', '127.0.0.1', '-p', String(port), ...args], { encoding: 'utf8', timeout: 20_000 }, (err, stdout, stderr) =>
      err ? reject(new Error(`redis-cli ${args.join(' ')}: ${stderr || stdout || err.message}`)) : resolve(stdout.trim()),
    );
  });
}

/** Polls `check` every 100 ms until it holds, for `ms` at most (outside a test too, unlike expect.poll). */
export async function until(what: string, ms: number, check: () => boolean | Promise<boolean>): Promise<void> {
  const end = performance.now() + ms;
  for (;;) {
    try {
      if (await check()) return;
    } catch {
      // not yet
    }
    if (performance.now() > end) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

export interface TestCluster {
  /** The masters, each with the slots it serves. */
  nodes: RedisProcess[];
  /** `127.0.0.1:PORT` of every node: the seed list memory.redis.cluster takes. */
  seeds: string[];
  stop(): Promise<void>;
}

/**
 * A Redis Cluster of `masters` real redis-server processes in cluster mode (no replicas), made
 * with `redis-cli --cluster create`. Each node's cluster bus is a port of its own (cluster-port),
 * so no port + 10000 has to be free.
 */
export async function startCluster(masters = 3): Promise<TestCluster> {
  const dir = mkdtempSync(join(tmpdir(), 'gw-cluster-'));
  const nodes: RedisProcess[] = [];
  const stop = async () => {
    for (const node of nodes) await node.stop();
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    for (let i = 0; i < masters; i++) {
      const [port, bus] = [await freePort(), await freePort()];
      const args = [
        '--port',
        String(port),
        ...EPHEMERAL,
        '--cluster-enabled',
        'yes',
        '--cluster-port',
        String(bus),
        '--cluster-config-file',
        `nodes-${port}.conf`,
        '--cluster-node-timeout',
        '2000',
      ];
      const node = redisProcess(port, args, /Ready to accept connections/, dir);
      nodes.push(node);
      await node.start();
    }
    const seeds = nodes.map((n) => `127.0.0.1:${n.port}`);
    const create = spawnSync('redis-cli', ['--cluster', 'create', ...seeds, '--cluster-yes'], { encoding: 'utf8', timeout: 30_000 });
    if (create.status !== 0) throw new Error(`redis-cli --cluster create failed: ${create.stdout}${create.stderr}`);
    await until('every node to say cluster_state:ok', 15_000, () =>
      nodes.every((n) => redisCli(n.port, 'cluster', 'info').includes('cluster_state:ok')),
    );
    return { nodes, seeds, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}

export interface TestSentinelSet {
  /** The master's name the sentinels watch. */
  name: string;
  /** `127.0.0.1:PORT` of each sentinel: what memory.redis.sentinels takes. */
  sentinels: string[];
  /** The first master, and its replica (the master after a failover). */
  master: RedisProcess;
  replica: RedisProcess;
  /** The port of the master the sentinels name now. */
  masterPort(): Promise<number>;
  stop(): Promise<void>;
}

/**
 * A Sentinel set: a master, a replica of it, and 3 sentinels (quorum 2) that call the master down
 * 1 s after it stops answering and promote the replica.
 */
export async function startSentinelSet(name = 'gwmaster'): Promise<TestSentinelSet> {
  const dir = mkdtempSync(join(tmpdir(), 'gw-sentinel-'));
  const all: RedisProcess[] = [];
  const stop = async () => {
    for (const p of all) await p.stop();
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    const started = async (port: number, args: string[], ready: RegExp) => {
      const p = redisProcess(port, args, ready, dir);
      all.push(p);
      await p.start();
      return p;
    };
    const masterPort = await freePort();
    const master = await started(masterPort, ['--port', String(masterPort), ...EPHEMERAL], /Ready to accept connections/);
    const replicaPort = await freePort();
    const replica = await started(
      replicaPort,
      ['--port', String(replicaPort), ...EPHEMERAL, '--replicaof', '127.0.0.1', String(masterPort)],
      /Ready to accept connections/,
    );
    await until('the replica to be in sync', 10_000, () => redisCli(replicaPort, 'info', 'replication').includes('master_link_status:up'));
    const sentinels: string[] = [];
    for (let i = 0; i < 3; i++) {
      const port = await freePort();
      // A sentinel rewrites its own config file: one each, in the set's folder.
      const file = join(dir, `sentinel-${port}.conf`);
      writeFileSync(
        file,
        [
          `port ${port}`,
          'bind 127.0.0.1',
          `sentinel monitor ${name} 127.0.0.1 ${masterPort} 2`,
          `sentinel down-after-milliseconds ${name} 1000`,
          `sentinel failover-timeout ${name} 5000`,
          `sentinel parallel-syncs ${name} 1`,
          '',
        ].join('\n'),
      );
      await started(port, [file, '--sentinel'], /\+monitor master/);
      sentinels.push(`127.0.0.1:${port}`);
    }
    const firstSentinel = Number(sentinels[0].split(':')[1]);
    await until('the sentinels to see each other and the replica', 15_000, () => {
      const info = redisCli(firstSentinel, 'info', 'sentinel');
      return /slaves=1,sentinels=3/.test(info);
    });
    const masterPortNow = async () =>
      Number((await redisCliAsync(firstSentinel, 'sentinel', 'get-master-addr-by-name', name)).split('\n')[1]);
    return { name, sentinels, master, replica, masterPort: masterPortNow, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}
