#!/usr/bin/env node
// Checks the Dockerfile where no Docker engine is available. It parses the Dockerfile, replays
// every stage's steps in a fresh temporary folder that stands in for the stage's root
// filesystem, then starts the final stage's CMD and requires its HEALTHCHECK to exit 0,
// GET /readyz to answer 200, no devDependencies in node_modules, and exit 0 after SIGTERM.
//
// What it cannot prove, each printed as a note when it applies: the base image is this
// machine's Node, not node:XX-slim; USER is not switched; COPY --chown/--chmod are ignored; an
// absolute path inside a RUN command points at this machine, not at the stage's folder.
//
// Usage: node scripts/check-dockerfile.mjs [--dockerfile PATH] [--build-arg NAME=VALUE]... [--keep]
import { spawn } from 'node:child_process';
import { cp, mkdir, mkdtemp, readFile, stat } from 'node:fs/promises';
import { existsSync, rmSync } from 'node:fs';
import { connect, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { basename, dirname, join, posix, relative, resolve, sep } from 'node:path';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const LIMITS = Object.freeze({
  totalMs: 8 * 60_000,
  runMs: 5 * 60_000,
  listenMs: 30_000,
  requestMs: 5_000,
  stopMs: 10_000,
});
const DEFAULT_HEALTHCHECK_TIMEOUT = '30s'; // Docker's default for --timeout
// Port 9 is "discard": an upstream call fails at once on loopback and nothing leaves the machine.
const UPSTREAM_STUB = 'http://127.0.0.1:9/v1';
// Docker's default shell is /bin/sh -c (dash on node:*-slim). bash runs every sh command the same
// way, though a bash-only construct would pass here and fail in the image.
const SHELL = ['bash', '-c'];
// A stage starts from a clean environment, as a container does. From this machine it takes only
// what finding binaries, reaching the registry (HOME for ~/.npmrc) and trusting its certificates
// need, so NODE_ENV, CONFIG, UPSTREAM_* or the npm_* variables of `npm run` cannot change the result.
const PASSED_ENV =
  /^(PATH|HOME|LANG|LC_ALL|TMPDIR|TZ|(HTTP|HTTPS|NO)_PROXY|NODE_EXTRA_CA_CERTS|SSL_CERT_(FILE|DIR)|npm_config_(registry|userconfig|cafile|ca|proxy|https_proxy|noproxy|strict_ssl))$/i;
const REPO_ROOT = fileURLToPath(new URL('..', import.meta.url));

class CheckFailure extends Error {
  constructor(where, message) {
    super(`${where}: ${message}`);
  }
}

function fail(where, message) {
  throw new CheckFailure(typeof where === 'string' ? where : `${where.where} ${where.name}`, message);
}

/** Everything that must go when the check ends, however it ends. */
const live = { children: new Set(), runDir: null, keep: false, deadline: Infinity };

function killGroup(child, signal) {
  if (child.exitCode !== null || child.signalCode !== null) return;
  try {
    process.kill(-child.pid, signal); // the group our own child leads (spawned detached)
  } catch {
    // already gone
  }
}

function cleanup() {
  for (const child of live.children) killGroup(child, 'SIGKILL');
  live.children.clear();
  if (live.runDir && live.keep) console.log(`[check] kept ${live.runDir}`);
  else if (live.runDir) rmSync(live.runDir, { recursive: true, force: true });
  live.runDir = null;
}

function finish(code) {
  cleanup();
  process.exit(code);
}

function say(label, message) {
  console.log(`[${label}] ${message}`);
}

const seconds = (ms) => `${(ms / 1000).toFixed(1)} s`;

function remaining() {
  const left = live.deadline - Date.now();
  if (left <= 0) fail('check', `overall time limit of ${LIMITS.totalMs / 60_000} min exceeded`);
  return left;
}

// ---------------------------------------------------------------------------------------------
// Parsing: lines -> instructions, words with Docker's quoting and ${VAR} substitution.

const DIRECTIVES = new Set(['syntax', 'escape', 'check']);

/** Joins continuations and drops comments; returns [{ line, name, args, where, display }]. */
function parseDockerfile(text, label) {
  const instructions = [];
  let directivesOpen = true;
  let pending = null;
  text.split(/\r?\n/).forEach((raw, i) => {
    const directive = directivesOpen && /^#\s*([a-zA-Z]\w*)\s*=\s*(.*?)\s*$/.exec(raw);
    if (directive && DIRECTIVES.has(directive[1].toLowerCase())) {
      if (directive[1].toLowerCase() === 'escape' && directive[2] !== '\\') {
        fail(`${label}:${i + 1}`, `escape=${directive[2]} is not supported by this check`);
      }
      return;
    }
    directivesOpen = false;
    // Comment and blank lines are dropped, also between the lines of one continued instruction.
    if (/^\s*(#|$)/.test(raw)) return;
    const continued = /\\[ \t]*$/.test(raw);
    const body = continued ? raw.replace(/\\[ \t]*$/, '') : raw;
    pending = pending ? { ...pending, text: pending.text + body } : { line: i + 1, text: body };
    if (continued) return;
    instructions.push(toInstruction(pending, label));
    pending = null;
  });
  if (pending) fail(`${label}:${pending.line}`, 'the file ends inside a line continuation');
  if (!instructions.length) fail(label, 'no instructions');
  return instructions;
}

function toInstruction({ line, text }, label) {
  const [, word, args] = /^\s*(\S+)\s*(.*)$/s.exec(text);
  const name = word.toUpperCase();
  return { line, name, args: args.trim(), where: `${label}:${line}`, display: `${name} ${args.trim().replace(/\s+/g, ' ')}` };
}

/** Splits like Docker's lexer: quotes, backslash escapes, and $VAR / ${VAR} / ${VAR:-x} / ${VAR:+x}. */
function words(text, vars, ins) {
  const out = [];
  let word = null;
  let i = 0;
  const add = (s) => (word = (word ?? '') + s);
  while (i < text.length) {
    const c = text[i];
    if (/\s/.test(c)) {
      if (word !== null) out.push(word);
      word = null;
      i += 1;
    } else if (c === "'") {
      const end = text.indexOf("'", i + 1);
      if (end < 0) fail(ins, 'unterminated single quote');
      add(text.slice(i + 1, end));
      i = end + 1;
    } else if (c === '"') {
      i = doubleQuoted(text, i + 1, vars, ins, add);
    } else if (c === '\\' && i + 1 < text.length) {
      add(text[i + 1]);
      i += 2;
    } else if (c === '$') {
      i = expandAt(text, i, vars, add);
    } else {
      add(c);
      i += 1;
    }
  }
  if (word !== null) out.push(word);
  return out;
}

function doubleQuoted(text, start, vars, ins, add) {
  add('');
  let i = start;
  while (i < text.length && text[i] !== '"') {
    if (text[i] === '\\' && i + 1 < text.length) {
      add(text[i + 1]);
      i += 2;
    } else if (text[i] === '$') {
      i = expandAt(text, i, vars, add);
    } else {
      add(text[i]);
      i += 1;
    }
  }
  if (i >= text.length) fail(ins, 'unterminated double quote');
  return i + 1;
}

/** Expands the variable reference at text[i] (a '$'); returns the index after it. */
function expandAt(text, i, vars, add) {
  const rest = text.slice(i);
  const braced = /^\$\{([A-Za-z_]\w*)(?:(:[-+])([^}]*))?\}/.exec(rest);
  const bare = /^\$([A-Za-z_]\w*)/.exec(rest);
  const match = braced ?? bare;
  if (!match) {
    add('$');
    return i + 1;
  }
  const [whole, name, modifier, alternative] = match;
  const value = vars[name] ?? '';
  if (modifier === ':-') add(value === '' ? expandAll(alternative, vars) : value);
  else if (modifier === ':+') add(value === '' ? '' : expandAll(alternative, vars));
  else add(value);
  return i + whole.length;
}

function expandAll(text, vars) {
  let out = '';
  for (let i = 0; i < text.length; ) {
    if (text[i] === '$') i = expandAt(text, i, vars, (s) => (out += s));
    else out += text[i++];
  }
  return out;
}

/** Takes leading --name=value flags off an instruction's arguments. */
function peelFlags(text) {
  const flags = {};
  let rest = text;
  let m;
  while ((m = /^--([a-z-]+)(?:=(\S*))?(?:\s+|$)/.exec(rest))) {
    flags[m[1]] = m[2] ?? '';
    rest = rest.slice(m[0].length);
  }
  return { flags, rest };
}

function unknownFlags(ins, flags, known) {
  const unknown = Object.keys(flags).filter((f) => !known.includes(f));
  if (unknown.length) fail(ins, `unsupported flag --${unknown.join(', --')}`);
}

/** The JSON array of strings Docker's exec form takes, or null: Docker then treats the text as shell form. */
function jsonArray(text) {
  if (!text.startsWith('[')) return null;
  try {
    const list = JSON.parse(text);
    return Array.isArray(list) && list.length && list.every((a) => typeof a === 'string') ? list : null;
  } catch {
    return null;
  }
}

const commandLine = (text) => jsonArray(text) ?? [...SHELL, text];

function splitAssign(word, ins) {
  const at = word.indexOf('=');
  const name = at < 0 ? word : word.slice(0, at);
  if (!/^[A-Za-z_]\w*$/.test(name)) fail(ins, `bad variable name "${name}"`);
  return [name, at < 0 ? undefined : word.slice(at + 1)];
}

function duration(text, ins) {
  const parts = [...text.matchAll(/(\d+(?:\.\d+)?)(ms|s|m|h)/g)];
  if (!parts.length || parts.map((p) => p[0]).join('') !== text) fail(ins, `bad duration "${text}"`);
  const unit = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };
  return parts.reduce((ms, [, n, u]) => ms + Number(n) * unit[u], 0);
}

// ---------------------------------------------------------------------------------------------
// The build context and .dockerignore.

/** Returns rel => excluded?, for posix paths relative to the context. The last matching rule wins. */
async function loadDockerignore(dir) {
  const text = await readFile(join(dir, '.dockerignore'), 'utf8').catch(() => '');
  const rules = text
    .split(/\r?\n/)
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith('#'))
    .map((l) => {
      const negate = l.startsWith('!');
      const pattern = posix.normalize((negate ? l.slice(1) : l).trim().replace(/^\/+/, ''));
      return { negate, re: globToRegExp(pattern) };
    });
  return (rel) => {
    // A rule matching a parent directory covers everything inside it.
    const prefixes = rel.split('/').map((_, i, parts) => parts.slice(0, i + 1).join('/'));
    let excluded = false;
    for (const rule of rules) if (prefixes.some((p) => rule.re.test(p))) excluded = !rule.negate;
    return excluded;
  };
}

function globToRegExp(glob) {
  let re = '';
  for (let i = 0; i < glob.length; i++) {
    const c = glob[i];
    if (glob.startsWith('**/', i)) {
      re += '(?:.*/)?';
      i += 2;
    } else if (glob.startsWith('**', i)) {
      re += '.*';
      i += 1;
    } else if (c === '*') re += '[^/]*';
    else if (c === '?') re += '[^/]';
    else if (c === '\\' && i + 1 < glob.length) re += escapeRegExp(glob[++i]);
    else if (c === '[' && glob.indexOf(']', i + 1) > 0) {
      const end = glob.indexOf(']', i + 1);
      re += `[${glob.slice(i + 1, end).replace(/^!/, '^')}]`;
      i = end;
    } else re += escapeRegExp(c);
  }
  return new RegExp(`^${re}$`);
}

const escapeRegExp = (s) => s.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');

function contextSource(ins, ctx, src) {
  const rel = posix.normalize(src.replace(/^\/+/, ''));
  if (rel === '..' || rel.startsWith('../')) fail(ins, `COPY source ${src} is outside the build context`);
  if (rel !== '.' && ctx.ignored(rel)) fail(ins, `COPY source ${src} is excluded by .dockerignore`);
  const filter = (path) => {
    const r = relative(ctx.dir, path).split(sep).join('/');
    return r === '' || !ctx.ignored(r);
  };
  return { path: join(ctx.dir, rel), filter, origin: 'the build context' };
}

// ---------------------------------------------------------------------------------------------
// Replaying the stages.

/** A container path inside a stage; resolving against '/' keeps '..' from leaving the stage's folder. */
const hostPath = (stage, path) => join(stage.root, posix.resolve('/', path));
const stageVars = (stage) => ({ ...stage.args, ...stage.env });

function baseEnv() {
  return Object.fromEntries(Object.entries(process.env).filter(([k]) => PASSED_ENV.test(k)));
}

function findStage(state, ref) {
  const byIndex = /^\d+$/.test(ref) ? state.stages[Number(ref)] : undefined;
  return byIndex ?? state.stages.find((s) => s.name === ref.toLowerCase());
}

function baseImageNote(image) {
  const host = process.versions.node;
  const tag = /^(?:docker\.io\/)?(?:library\/)?node(?::(\S+))?$/.exec(image);
  if (!tag) return `note: base image ${image} is represented by this machine (Node v${host}); the image itself is not checked`;
  const major = /^\d+/.exec(tag[1] ?? '')?.[0];
  const differs = major && major !== host.split('.')[0] ? ` (the image would run Node ${major})` : '';
  return `note: base image ${image} is represented by this machine's own Node v${host}${differs}`;
}

const HANDLERS = {
  ARG(ins, state) {
    const vars = state.stage ? state.stage.args : state.globalArgs;
    for (const word of words(ins.args, state.stage ? stageVars(state.stage) : state.globalArgs, ins)) {
      const [name, fallback] = splitAssign(word, ins);
      // A build arg beats a default; an ARG redeclared in a stage without one inherits the global value.
      const value = state.ctx.buildArgs[name] ?? fallback ?? (state.stage ? state.globalArgs[name] : undefined);
      if (value !== undefined) vars[name] = value;
    }
  },

  async FROM(ins, state) {
    const { flags, rest } = peelFlags(ins.args);
    unknownFlags(ins, flags, ['platform']);
    const w = words(rest, state.globalArgs, ins);
    if (!(w.length === 1 || (w.length === 3 && /^as$/i.test(w[1])))) fail(ins, 'expected FROM image [AS name]');
    const index = state.stages.length;
    const name = (w[2] ?? String(index)).toLowerCase();
    const parent = findStage(state, w[0]);
    const stage = {
      name,
      root: join(state.ctx.runDir, `stage-${index}`),
      ...(parent
        ? structuredClone({ workdir: parent.workdir, env: parent.env, exposed: parent.exposed, healthcheck: parent.healthcheck, cmd: parent.cmd })
        : { workdir: '/', env: {}, exposed: [], healthcheck: undefined, cmd: undefined }),
      args: {},
    };
    if (parent) await cp(parent.root, stage.root, { recursive: true, verbatimSymlinks: true });
    else await mkdir(stage.root);
    state.stages.push(stage);
    state.stage = stage;
    say(name, `${ins.display}${w.join(' ') === ins.args ? '' : `  (${w.join(' ')})`}`);
    if (!parent) say(name, baseImageNote(w[0]));
  },

  async WORKDIR(ins, { stage }) {
    const w = words(ins.args, stageVars(stage), ins);
    if (w.length !== 1) fail(ins, 'WORKDIR takes one path');
    stage.workdir = posix.resolve(stage.workdir, w[0]);
    await mkdir(hostPath(stage, stage.workdir), { recursive: true });
  },

  async COPY(ins, state) {
    const { flags, rest } = peelFlags(ins.args);
    unknownFlags(ins, flags, ['from', 'chown', 'chmod', 'link']);
    const vars = stageVars(state.stage);
    const paths = jsonArray(rest)?.map((p) => expandAll(p, vars)) ?? words(rest, vars, ins);
    if (paths.length < 2) fail(ins, 'COPY needs a source and a destination');
    const dest = paths.pop();
    if (paths.length > 1 && !dest.endsWith('/')) fail(ins, 'COPY with several sources needs a destination ending in /');
    const from = flags.from === undefined ? null : findStage(state, expandAll(flags.from, vars));
    if (flags.from !== undefined && (!from || from === state.stage)) {
      fail(ins, `--from=${flags.from} is not an earlier stage (copying from images is not supported here)`);
    }
    if ('chown' in flags || 'chmod' in flags) say(state.stage.name, 'note: --chown/--chmod are not emulated');
    const target = posix.resolve(state.stage.workdir, dest);
    for (const src of paths) {
      if (/[*?[]/.test(src)) fail(ins, `wildcards in COPY sources (${src}) are not supported by this check`);
      const source = from
        ? { path: hostPath(from, posix.resolve('/', src)), origin: `stage ${from.name}` }
        : contextSource(ins, state.ctx, src);
      await copyOne(ins, state.stage, source, target, dest.endsWith('/'));
    }
  },

  async RUN(ins, state) {
    const limit = Math.min(LIMITS.runMs, remaining());
    const started = Date.now();
    const env = { ...baseEnv(), npm_config_cache: state.ctx.npmCache, ...stageVars(state.stage) };
    const result = await runProcess(commandLine(ins.args), { cwd: hostPath(state.stage, state.stage.workdir), env }, limit);
    const took = seconds(Date.now() - started);
    if (result.timedOut) fail(ins, `stopped after ${seconds(limit)} (${limit === LIMITS.runMs ? 'the limit per RUN' : 'the overall limit'})`);
    if (result.error) fail(ins, `could not start: ${result.error.message}`);
    if (result.code !== 0) fail(ins, `${describeExit(result)} after ${took} (output above)`);
    say(state.stage.name, `  done in ${took}`);
  },

  ENV(ins, { stage }) {
    const vars = stageVars(stage);
    // All values are expanded before any is set, as Docker does within one ENV line.
    const pairs = /^[^\s=]+=/.test(ins.args)
      ? words(ins.args, vars, ins).map((w) => splitAssign(w, ins))
      : (([name, ...value]) => [[name, value.join(' ')]])(words(ins.args, vars, ins));
    for (const [name, value] of pairs) {
      if (value === undefined) fail(ins, `ENV ${name} has no value`);
      stage.env[name] = value;
    }
  },

  USER(ins, { stage }) {
    const [user] = words(ins.args, stageVars(stage), ins);
    const me = process.getuid?.() === 0 ? 'root' : `uid ${process.getuid?.()}`;
    say(stage.name, `note: not switching to user ${user}; this check runs as ${me}, so file permissions for ${user} are not checked`);
  },

  EXPOSE(ins, { stage }) {
    stage.exposed.push(...words(ins.args, stageVars(stage), ins).map((p) => p.split('/')[0]));
  },

  HEALTHCHECK(ins, { stage }) {
    if (/^NONE$/i.test(ins.args)) {
      stage.healthcheck = undefined;
      return;
    }
    const { flags, rest } = peelFlags(ins.args);
    unknownFlags(ins, flags, ['interval', 'timeout', 'start-period', 'start-interval', 'retries']);
    const cmd = /^CMD\s+(.*)$/is.exec(rest);
    if (!cmd) fail(ins, 'expected HEALTHCHECK [options] CMD command');
    const timeoutMs = duration(flags.timeout ?? DEFAULT_HEALTHCHECK_TIMEOUT, ins);
    stage.healthcheck = { argv: commandLine(cmd[1]), timeoutMs, where: ins.where };
  },

  CMD(ins, { stage }) {
    stage.cmd = { argv: commandLine(ins.args), where: ins.where };
  },
};

async function copyOne(ins, stage, source, target, intoDir) {
  const info = await stat(source.path).catch(() => null);
  if (!info) fail(ins, `COPY source ${relative(REPO_ROOT, source.path) || source.path} not found in ${source.origin}`);
  let dest = hostPath(stage, target);
  if (info.isDirectory()) {
    // Docker copies a directory's contents, not the directory itself.
    await cp(source.path, dest, { recursive: true, verbatimSymlinks: true, filter: source.filter });
    return;
  }
  const isDir = await stat(dest).then((s) => s.isDirectory(), () => false);
  if (intoDir || isDir) dest = join(dest, basename(source.path));
  await mkdir(dirname(dest), { recursive: true });
  await cp(source.path, dest, { verbatimSymlinks: true });
}

async function buildStages(instructions, ctx) {
  const state = { ctx, globalArgs: {}, stages: [], stage: null };
  for (const ins of instructions) {
    remaining();
    const handler = HANDLERS[ins.name];
    if (!handler) fail(ins, 'unknown instruction; teach scripts/check-dockerfile.mjs about it before using it');
    if (!state.stage && ins.name !== 'ARG' && ins.name !== 'FROM') fail(ins, 'only ARG may come before the first FROM');
    if (ins.name !== 'FROM') say(state.stage?.name ?? 'global', ins.display);
    await handler(ins, state);
  }
  if (!state.stage) fail('check', 'the Dockerfile has no FROM');
  return state.stage;
}

// ---------------------------------------------------------------------------------------------
// Child processes: each in its own process group, echoed, bounded in time, killed on the way out.

function startProcess(argv, { cwd, env }) {
  const child = spawn(argv[0], argv.slice(1), { cwd, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  live.children.add(child);
  for (const stream of [child.stdout, child.stderr]) {
    createInterface({ input: stream }).on('line', (line) => process.stdout.write(`    | ${line}\n`));
  }
  const settle = (event) =>
    new Promise((done) => {
      child.once('error', (error) => done({ code: null, signal: null, error }));
      child.once(event, (code, signal) => done({ code, signal }));
    });
  const exited = settle('exit');
  const closed = settle('close'); // output fully read as well
  closed.then(() => live.children.delete(child));
  return { child, exited, closed };
}

async function runProcess(argv, options, limitMs) {
  const proc = startProcess(argv, options);
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    killGroup(proc.child, 'SIGKILL');
  }, limitMs);
  const result = await proc.closed;
  clearTimeout(timer);
  return { ...result, timedOut };
}

function describeExit({ code, signal, error }) {
  if (error) return `failed to start (${error.message})`;
  return signal ? `killed by ${signal}` : `exited with code ${code}`;
}

// ---------------------------------------------------------------------------------------------
// The final stage as a running container.

function freePort() {
  return new Promise((done, reject) => {
    const server = createServer();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => done(port));
    });
  });
}

function canConnect(port) {
  return new Promise((done) => {
    const socket = connect({ port, host: '127.0.0.1' });
    socket.setTimeout(500, () => socket.destroy());
    socket.once('connect', () => {
      socket.destroy();
      done(true);
    });
    socket.once('error', () => {}); // refused while starting up: 'close' follows
    socket.once('close', () => done(false));
  });
}

async function waitForListen(server, port, where) {
  const limit = Math.min(LIMITS.listenMs, remaining());
  const started = Date.now();
  let exit = null;
  server.exited.then((r) => (exit = r));
  while (Date.now() - started < limit) {
    if (exit) fail(where, `CMD ${describeExit(exit)} before listening on 127.0.0.1:${port} (output above)`);
    if (await canConnect(port)) return Date.now() - started;
    await sleep(100);
  }
  fail(where, `CMD did not listen on 127.0.0.1:${port} within ${seconds(limit)}`);
}

async function runHealthcheck(healthcheck, options) {
  const started = Date.now();
  const result = await runProcess(healthcheck.argv, options, healthcheck.timeoutMs);
  if (result.timedOut) fail(healthcheck.where, `HEALTHCHECK did not finish within its timeout of ${seconds(healthcheck.timeoutMs)}`);
  if (result.code !== 0) fail(healthcheck.where, `HEALTHCHECK ${describeExit(result)} (Docker would mark the container unhealthy)`);
  say('check', `HEALTHCHECK exited 0 in ${seconds(Date.now() - started)}`);
}

async function checkReadyz(port) {
  const url = `http://127.0.0.1:${port}/readyz`;
  const res = await fetch(url, { signal: AbortSignal.timeout(LIMITS.requestMs) }).catch((err) =>
    fail('check', `GET ${url} failed: ${err.message}`),
  );
  const body = await res.text();
  if (res.status !== 200) fail('check', `GET /readyz answered ${res.status}, expected 200: ${body.slice(0, 200)}`);
  say('check', `GET /readyz -> 200 ${body.slice(0, 80)}`);
}

/** The image's own package.json names its devDependencies; none may be in its node_modules. */
async function checkNoDevDependencies(appDir) {
  const readJson = async (file) => JSON.parse(await readFile(join(appDir, file), 'utf8'));
  const pkg = await readJson('package.json').catch(() => fail('check', `no package.json in the final stage's ${appDir}`));
  const lock = await readJson('package-lock.json').catch(() => null);
  const installed = (name) => existsSync(join(appDir, 'node_modules', name));
  const deps = Object.keys(pkg.dependencies ?? {});
  const missing = deps.filter((name) => !installed(name));
  if (missing.length) fail('check', `dependencies missing from node_modules: ${missing.join(', ')}`);
  // A devDependency that a production dependency also needs is rightly installed: the lockfile says which.
  const devOnly = (name) => {
    const entry = lock?.packages?.[`node_modules/${name}`];
    return !entry || entry.dev === true;
  };
  const devs = Object.keys(pkg.devDependencies ?? {});
  const present = devs.filter((name) => installed(name) && devOnly(name));
  if (present.length) fail('check', `devDependencies installed in the final stage: ${present.join(', ')}`);
  say('check', `node_modules: ${deps.length} dependencies present, devDependencies absent (${devs.join(', ')})`);
}

async function stopGracefully(server, where) {
  const started = Date.now();
  server.child.kill('SIGTERM');
  const result = await Promise.race([server.exited, sleep(LIMITS.stopMs, null, { ref: false })]);
  if (!result) fail(where, `CMD still running ${seconds(LIMITS.stopMs)} after SIGTERM`);
  if (result.code !== 0) fail(where, `CMD ${describeExit(result)} after SIGTERM, expected exit code 0`);
  say('check', `SIGTERM -> exited 0 after ${seconds(Date.now() - started)}`);
}

function noteExpose(stage) {
  const port = stage.env.PORT;
  if (!stage.exposed.length) say('check', 'note: the final stage EXPOSEs no port');
  else if (port && !stage.exposed.includes(port)) say('check', `warning: ENV PORT=${port} but EXPOSE ${stage.exposed.join(' ')}`);
}

async function checkImage(stage) {
  if (!stage.cmd) fail('check', `the final stage (${stage.name}) has no CMD`);
  if (!stage.healthcheck) fail('check', `the final stage (${stage.name}) has no HEALTHCHECK`);
  noteExpose(stage);
  const port = await freePort();
  const overrides = { HOST: '127.0.0.1', PORT: String(port), UPSTREAM_URL: UPSTREAM_STUB };
  const options = { cwd: hostPath(stage, stage.workdir), env: { ...baseEnv(), ...stage.env, ...overrides } };
  say('check', `start ${stage.name}: ${stage.cmd.argv.join(' ')} in ${stage.workdir}, with ${Object.entries(overrides).map(([k, v]) => `${k}=${v}`).join(' ')}`);
  const server = startProcess(stage.cmd.argv, options);
  say('check', `listening after ${seconds(await waitForListen(server, port, stage.cmd.where))}`);
  await runHealthcheck(stage.healthcheck, options);
  await checkReadyz(port);
  await checkNoDevDependencies(options.cwd);
  await stopGracefully(server, stage.cmd.where);
}

// ---------------------------------------------------------------------------------------------

function parseCli() {
  let values;
  try {
    ({ values } = parseArgs({
      options: {
        dockerfile: { type: 'string', default: join(REPO_ROOT, 'Dockerfile') },
        'build-arg': { type: 'string', multiple: true, default: [] },
        keep: { type: 'boolean', default: false },
      },
    }));
  } catch (err) {
    fail('usage', `${err.message}\n  node scripts/check-dockerfile.mjs [--dockerfile PATH] [--build-arg NAME=VALUE]... [--keep]`);
  }
  const buildArgs = Object.fromEntries(values['build-arg'].map((a) => splitAssign(a, 'usage: --build-arg')));
  const dockerfile = resolve(values.dockerfile);
  const near = relative(process.cwd(), dockerfile);
  return { dockerfile, label: near && !near.startsWith('..') ? near : dockerfile, buildArgs, keep: values.keep };
}

async function main() {
  const started = Date.now();
  live.deadline = started + LIMITS.totalMs;
  // Backstop for anything without its own limit: the steps stop themselves at the deadline first.
  setTimeout(() => {
    console.error(`dockerfile check: FAILED — overall time limit of ${LIMITS.totalMs / 60_000} min exceeded`);
    finish(1);
  }, LIMITS.totalMs + 5_000).unref();

  const options = parseCli();
  live.keep = options.keep;
  const text = await readFile(options.dockerfile, 'utf8').catch((err) => fail(options.label, err.message));
  const instructions = parseDockerfile(text, options.label);
  live.runDir = await mkdtemp(join(tmpdir(), 'check-dockerfile-'));
  const ctx = {
    dir: REPO_ROOT,
    ignored: await loadDockerignore(REPO_ROOT),
    buildArgs: options.buildArgs,
    runDir: live.runDir,
    // One npm cache per check run: stages share downloads, and `npm cache clean` in a RUN
    // cannot wipe this machine's own cache.
    npmCache: join(live.runDir, 'npm-cache'),
  };
  say('check', `${options.label}: ${instructions.length} steps, context ${REPO_ROOT}, stages under ${live.runDir}`);
  const final = await buildStages(instructions, ctx);
  await checkImage(final);
  console.log(`dockerfile check: ok (${instructions.length} steps, ${Math.round((Date.now() - started) / 1000)} s)`);
}

process.once('SIGINT', () => {
  console.error('dockerfile check: interrupted');
  finish(130);
});
process.once('SIGTERM', () => {
  console.error('dockerfile check: terminated');
  finish(143);
});
process.on('exit', cleanup);

main().then(
  () => finish(0),
  (err) => {
    const detail = err instanceof CheckFailure ? err.message : `unexpected error in the check script: ${err.stack ?? err}`;
    console.error(`dockerfile check: FAILED — ${detail}`);
    finish(1);
  },
);
