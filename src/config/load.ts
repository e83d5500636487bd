import { existsSync, readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { expandVariables } from './expand.js';
import { configSchema, type Config } from './schema.js';
import { allKeyPaths, keysAt, kindAt, type ValueKind } from './shape.js';
import { closest } from './suggest.js';

/** Every problem of a config, each one line (a value quoted from a file cannot break it). */
export class ConfigError extends Error {
  readonly code = 'GW_CONFIG_INVALID';
  readonly problems: string[];
  constructor(problems: string[]) {
    const lines = problems.map(oneLine);
    super(`invalid configuration: ${lines.join('; ')}`);
    this.problems = lines;
  }
}

/** Control characters (a line break in a key, a YAML error's code frame) as spaces, runs of them as one. */
function oneLine(text: string): string {
  return text.replace(/[\u0000-\u001f\u007f\u2028\u2029]+/g, ' ').trim();
}

type Env = Record<string, string | undefined>;
/** `windows`: `32768` (every model), or `qwen3*=32768,llama3*=8192`. */
type EnvKind = ValueKind | 'windows';
type Tree = Record<string, unknown>;

/** Environment variables and the config key each one sets, with how to read its value. */
export const ENV_KEYS: Array<[name: string, path: string, kind: EnvKind]> = [
  ['HOST', 'server.host', 'string'],
  ['PORT', 'server.port', 'int'],
  ['BODY_LIMIT_BYTES', 'server.bodyLimitBytes', 'int'],
  ['SHUTDOWN_GRACE_MS', 'server.shutdownGraceMs', 'int'],
  ['REQUEST_TIMEOUT_MS', 'server.requestTimeoutMs', 'int'],
  ['HEADERS_TIMEOUT_MS', 'server.headersTimeoutMs', 'int'],
  ['KEEP_ALIVE_TIMEOUT_MS', 'server.keepAliveTimeoutMs', 'int'],
  ['UPSTREAM_URL', 'upstream.url', 'string'],
  ['UPSTREAM_API_KEY', 'upstream.apiKey', 'string'],
  ['UPSTREAM_FIRST_BYTE_TIMEOUT_MS', 'upstream.firstByteTimeoutMs', 'int'],
  ['UPSTREAM_IDLE_TIMEOUT_MS', 'upstream.idleTimeoutMs', 'int'],
  ['UPSTREAM_PREAMBLE_HOLD_MS', 'upstream.preambleHoldMs', 'int'],
  ['UPSTREAM_PROXY', 'upstream.proxy', 'string'],
  ['UPSTREAM_CA_FILE', 'upstream.caFile', 'string'],
  ['UPSTREAM_CONTEXT_WINDOW', 'upstream.windows', 'windows'],
  ['UPSTREAM_DISCOVER_WINDOWS', 'upstream.discoverWindows', 'bool'],
  ['GATEWAY_API_KEYS', 'auth.keys', 'list'],
  ['GATEWAY_ALLOW_OPEN', 'auth.allowOpen', 'bool'],
  ['GATEWAY_METRICS_KEY', 'auth.metricsKey', 'string'],
  ['GATEWAY_METRICS_MODEL_NAMES', 'auth.metricsModelNames', 'bool'],
  ['LOG_LEVEL', 'log.level', 'string'],
  ['LOG_FORMAT', 'log.format', 'string'],
  ['COMPACTION_STRATEGY', 'compaction.strategy', 'string'],
  ['COMPACTION_MASK', 'compaction.mask', 'bool'],
  ['COMPACTION_MAX_REPLAYS', 'compaction.maxReplays', 'int'],
  ['COMPACTION_KEEP_RECENT', 'compaction.keepRecent', 'int'],
  ['COMPACTION_PROACTIVE', 'compaction.proactive', 'bool'],
  ['COMPACTION_TARGET_RATIO', 'compaction.targetRatio', 'number'],
  ['COMPACTION_MIN_COMPLETION_TOKENS', 'compaction.minCompletionTokens', 'int'],
  ['COMPACTION_RESCUE_BUDGET_BYTES', 'compaction.rescueBudgetBytes', 'int'],
  ['COMPACTION_RESCUE_WAIT_MS', 'compaction.rescueWaitMs', 'int'],
  ['COMPACTION_TRANSLATE_OVERFLOW', 'compaction.translateOverflow', 'bool'],
  ['MEMORY_ENABLED', 'memory.enabled', 'bool'],
  ['MEMORY_REDIS_URL', 'memory.redisUrl', 'string'],
  ['MEMORY_REDIS_CLUSTER_NODES', 'memory.redis.cluster', 'list'],
  ['MEMORY_REDIS_SENTINELS', 'memory.redis.sentinels', 'list'],
  ['MEMORY_REDIS_SENTINEL_NAME', 'memory.redis.name', 'string'],
  ['MEMORY_REDIS_SENTINEL_PASSWORD', 'memory.redis.sentinelPassword', 'string'],
  ['MEMORY_REDIS_USERNAME', 'memory.redis.username', 'string'],
  ['MEMORY_REDIS_PASSWORD', 'memory.redis.password', 'string'],
  ['MEMORY_REDIS_TLS', 'memory.redis.tls', 'bool'],
  ['MEMORY_REDIS_CA_FILE', 'memory.redis.caFile', 'string'],
  ['MEMORY_MAX_BYTES', 'memory.maxBytes', 'int'],
  ['MEMORY_TTL_SECONDS', 'memory.ttlSeconds', 'int'],
  ['MEMORY_SHARE_ANONYMOUS', 'memory.shareAnonymous', 'bool'],
  ['MEMORY_TENANT_SECRET', 'memory.tenantSecret', 'string'],
  ['SUMMARIZER_URL', 'summarizer.url', 'string'],
  ['SUMMARIZER_API', 'summarizer.api', 'string'],
  ['SUMMARIZER_MODEL', 'summarizer.model', 'string'],
  ['SUMMARIZER_API_KEY', 'summarizer.apiKey', 'string'],
  ['SUMMARIZER_TIMEOUT_MS', 'summarizer.timeoutMs', 'int'],
  ['SUMMARIZER_MAX_INPUT_TOKENS', 'summarizer.maxInputTokens', 'int'],
  ['SUMMARIZER_MAX_SUMMARY_TOKENS', 'summarizer.maxSummaryTokens', 'int'],
  ['SUMMARIZER_MAX_CALLS', 'summarizer.maxCalls', 'int'],
  ['SUMMARIZER_MAX_INPUT_BYTES', 'summarizer.maxInputBytes', 'int'],
  ['SUMMARIZER_PROVIDER_COMPACTION', 'summarizer.providerCompaction', 'bool'],
  ['STATUS_ENABLED', 'status.enabled', 'bool'],
  ['STATUS_CONTENT', 'status.content', 'bool'],
  // OpenTelemetry's own names, as every SDK and collector operator knows them.
  ['OTEL_EXPORTER_OTLP_ENDPOINT', 'telemetry.otlpEndpoint', 'string'],
  ['OTEL_EXPORTER_OTLP_TRACES_ENDPOINT', 'telemetry.tracesEndpoint', 'string'],
  ['OTEL_SERVICE_NAME', 'telemetry.serviceName', 'string'],
];

export const ENV_NAMES = ENV_KEYS.map(([name]) => name);

/** The prefixes of the gateway's own variables: one of these that it does not read is a mistake. */
const ENV_PREFIXES = /^(UPSTREAM|GATEWAY|COMPACTION|SUMMARIZER|MEMORY)_/;

/**
 * Defaults < file (`--config FILE`, else CONFIG, else `defaultFile` if it exists) < environment; frozen. Throws ConfigError
 * listing every problem.
 */
export function loadConfig(argv: readonly string[], env: Env, defaultFile?: string): Readonly<Config> {
  const file = configSource(argv, env, defaultFile);
  const tree: Tree = file ? readConfigFile(file) : {};
  const fromEnv = new Map<string, string>();
  const set = ENV_KEYS.filter(([name]) => env[name] !== undefined && env[name] !== '');
  const expansion = expandVariables(tree, env, new Set(set.map(([, path]) => path)), (path, text) =>
    envValue(text, kindAt(path) ?? 'string'),
  );
  if (expansion.problems.length > 0) throw new ConfigError(expansion.problems.map((p) => `config file ${file}: ${p}`));
  for (const [path, reference] of expansion.sources) fromEnv.set(path, reference);
  for (const [name, path, kind] of set) {
    setPath(tree, path, envValue(env[name]!, kind));
    fromEnv.set(path, name);
  }
  return validateConfig(tree, fromEnv);
}

export interface UnknownVariable {
  name: string;
  meant?: { name: string; key: string };
}

/** Variables with the gateway's prefixes that it does not read (a typo, or a name from elsewhere), never their values. */
export function unknownVariables(env: Env): UnknownVariable[] {
  const keyOf = new Map(ENV_KEYS.map(([name, path]) => [name, path]));
  return Object.keys(env)
    .filter((name) => ENV_PREFIXES.test(name) && !keyOf.has(name))
    .sort()
    .map((name) => {
      // GATEWAY_PORT means PORT; else the nearest name after the same prefix (UPSTREAM_BASE_URL: UPSTREAM_URL).
      const prefix = ENV_PREFIXES.exec(name)![0];
      const rest = name.slice(prefix.length);
      const siblings = ENV_NAMES.filter((known) => known.startsWith(prefix)).map((known) => known.slice(prefix.length));
      const sibling = closest(rest, siblings);
      const meant = keyOf.has(rest) ? rest : sibling ? prefix + sibling : closest(name, ENV_NAMES, true);
      return meant ? { name, meant: { name: meant, key: keyOf.get(meant)! } } : { name };
    });
}

export function unknownVariableWarning({ name, meant }: UnknownVariable): string {
  const guess = meant ? `: did you mean ${meant.name} (${meant.key})?` : `; the gateway's variables are listed by --help`;
  return `environment variable ${name} is set, but the gateway reads no such variable and ignores it${guess}`;
}

/** The config file in force (`--config`, else CONFIG, else `defaultFile` if it exists), or none: defaults and environment only. */
export function configSource(argv: readonly string[], env: Env, defaultFile?: string): string | undefined {
  return configPath(argv, env) ?? (defaultFile && existsSync(defaultFile) ? defaultFile : undefined);
}

export function validateConfig(input: unknown, fromEnv = new Map<string, string>()): Readonly<Config> {
  const result = configSchema.safeParse(input);
  if (!result.success) {
    throw new ConfigError(
      result.error.issues.flatMap((issue) => {
        if (issue.code === 'unrecognized_keys') return issue.keys.map((key) => unknownKeyProblem(issue.path, key));
        const path = keyPath(issue.path) || '(root)';
        // A problem that names its value in its own words is not followed by it; a mapping is never shown (it may hold a key).
        const said = issue.code === 'custom' && (issue.params as { said?: boolean } | undefined)?.said === true;
        const shown = said ? '' : shownValue(issue.path, valueAt(input, issue.path), fromEnv.get(issue.path.join('.')));
        return `${path}${variableSaid(issue.path.join('.'), fromEnv)}: ${issue.message}${shown}`;
      }),
    );
  }
  const files = caFileProblems(result.data, fromEnv);
  if (files.length > 0) throw new ConfigError(files);
  return deepFreeze(result.data);
}

/** A CA file that cannot be read or holds no PEM certificate: said now, not at the first TLS handshake. */
function caFileProblems(config: Config, fromEnv: ReadonlyMap<string, string>): string[] {
  const files: Array<[string, string | undefined]> = [
    ['upstream.caFile', config.upstream.caFile],
    ...Object.entries(config.upstreams ?? {}).map(([name, u]): [string, string | undefined] => [`upstreams.${name}.caFile`, u.caFile]),
    ['memory.redis.caFile', typeof config.memory.redis === 'object' ? config.memory.redis.caFile : undefined],
  ];
  const problems: string[] = [];
  for (const [key, file] of files) {
    if (file === undefined) continue;
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch (err) {
      problems.push(`${key}${variableSaid(key, fromEnv)}: cannot be read: ${(err as Error).message}`);
      continue;
    }
    if (!text.includes('-----BEGIN CERTIFICATE-----'))
      problems.push(`${key}${variableSaid(key, fromEnv)}: ${file} holds no PEM certificate (-----BEGIN CERTIFICATE-----)`);
  }
  return problems;
}

/** `upstream.api_key: unknown key; did you mean apiKey?`: a near key at that level, else one by that name elsewhere. */
function unknownKeyProblem(at: readonly PropertyKey[], key: string): string {
  const here = closest(key, keysAt(at));
  const elsewhere = allKeyPaths()
    .filter((path) => path.slice(0, -1).join('.') !== at.join('.') && closest(key, [path.at(-1)!], true) !== undefined)
    .map((path) => path.join('.'))
    .slice(0, 3);
  const guess = here ?? (elsewhere.length > 0 ? elsewhere.join(' or ') : undefined);
  return `${keyPath([...at, key])}: unknown key${guess ? `; did you mean ${guess}?` : ''}`;
}

/** `upstreams."Bad Name".url`: a key that is not a plain word is quoted, so an empty one or one with a line break still shows. */
function keyPath(path: readonly PropertyKey[]): string {
  return path.map((key) => (typeof key === 'string' && !/^[\w-]+$/.test(key) ? JSON.stringify(key) : String(key))).join('.');
}

const VARIABLE_OF = new Map(ENV_KEYS.map(([name, path]) => [path, name]));

/** ` (from PORT)` for a value the environment set, ` (or PORT)` for a key a variable can set, else nothing. */
function variableSaid(path: string, fromEnv: ReadonlyMap<string, string>): string {
  const from = fromEnv.get(path);
  if (from) return ` (from ${from})`;
  const variable = VARIABLE_OF.get(path);
  return variable ? ` (or ${variable})` : '';
}

function valueAt(input: unknown, path: readonly PropertyKey[]): unknown {
  let node = input;
  for (const key of path) {
    if (typeof node !== 'object' || node === null) return undefined;
    node = (node as Record<PropertyKey, unknown>)[key];
  }
  return node;
}

/**
 * Shown only where it cannot be a key: a number, a boolean, a URL without credentials, query or fragment, a short word. Never a key
 * field's value nor one from a variable named for a credential: a key pasted into the wrong place is described by its length.
 */
function shownValue(path: readonly PropertyKey[], value: unknown, source: string | undefined): string {
  if (value === undefined || (typeof value === 'object' && value !== null)) return '';
  const key = String(path.at(-1));
  if (key === 'apiKey' || /(password|secret)$/i.test(key) || path[0] === 'auth' || (source !== undefined && SECRET_VARIABLE.test(source)))
    return '; got [redacted]';
  if (typeof value !== 'string') return `; got ${JSON.stringify(value) ?? String(value)}`;
  // A URL is shown without its credentials, query and fragment; one that is no URL as any other string.
  const url = /(url|proxy|redis|endpoint)$/i.test(key) && URL.canParse(value) ? new URL(value) : undefined;
  if (url && value.includes('://')) return `; got ${JSON.stringify(`${url.protocol}//${url.host}${url.pathname}`.slice(0, 80))}`;
  return SHOWN_WORD.test(value) ? `; got ${JSON.stringify(value)}` : `; got a string of ${value.length} characters`;
}

/** A variable named for a credential (`UPSTREAM_API_KEY`, `${GATEWAY_API_KEYS}`, `REDIS_PASSWORD`). */
const SECRET_VARIABLE = /(KEYS?|TOKEN|SECRET|PASSWORD|CREDENTIALS?)\}?$/i;
/** Short enough, and plain enough, not to be a key (provider keys run 39 characters and more). */
const SHOWN_WORD = /^[\w .:/@+-]{0,24}$/;

function configPath(argv: readonly string[], env: Env): string | undefined {
  const i = argv.indexOf('--config');
  if (i >= 0) {
    const value = argv[i + 1];
    if (!value) throw new ConfigError(['--config needs a file path']);
    return value;
  }
  const inline = argv.find((a) => a.startsWith('--config='));
  if (inline) return inline.slice('--config='.length);
  return env.CONFIG || undefined;
}

function readConfigFile(file: string): Tree {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new ConfigError([`config file ${file}: ${(err as Error).message}`]);
  }
  let parsed: unknown;
  try {
    parsed = parseYaml(text) ?? {};
  } catch (err) {
    // Its first line says where; the lines after it quote the file, which may hold a key.
    throw new ConfigError([`config file ${file}: not valid YAML/JSON: ${(err as Error).message.split('\n')[0].replace(/:$/, '')}`]);
  }
  if (typeof parsed !== 'object' || Array.isArray(parsed) || parsed === null) {
    throw new ConfigError([`config file ${file}: must be a mapping of keys to values`]);
  }
  return parsed as Tree;
}

function envValue(raw: string, kind: EnvKind): unknown {
  if (kind === 'list')
    return raw
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean);
  if (kind === 'bool') return /^(true|1|yes|on)$/i.test(raw.trim()) ? true : /^(false|0|no|off)$/i.test(raw.trim()) ? false : raw;
  // A non-numeric value stays a string so the schema reports it against its key.
  if (kind === 'int') return /^-?\d+$/.test(raw.trim()) ? Number(raw.trim()) : raw;
  if (kind === 'windows') return windowsValue(raw);
  if (kind === 'number') return /^-?\d+(\.\d+)?$/.test(raw.trim()) ? Number(raw.trim()) : raw;
  return raw;
}

/** `32768`, or `glob=tokens` pairs separated by commas; a value of another shape stays a string, reported against its key. */
function windowsValue(raw: string): unknown {
  const text = raw.trim();
  if (/^\d+$/.test(text)) return [{ model: '*', tokens: Number(text) }];
  const pairs = text.split(',').map((pair) => /^\s*([^=\s]+)\s*=\s*(\d+)\s*$/.exec(pair));
  return pairs.every((m) => m !== null) ? pairs.map((m) => ({ model: m[1], tokens: Number(m[2]) })) : raw;
}

function setPath(tree: Tree, path: string, value: unknown): void {
  const keys = path.split('.');
  let node = tree;
  for (const key of keys.slice(0, -1)) {
    const next = node[key];
    if (typeof next !== 'object' || next === null || Array.isArray(next)) node[key] = {};
    node = node[key] as Tree;
  }
  node[keys[keys.length - 1]] = value;
}

function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null) {
    for (const child of Object.values(value)) deepFreeze(child);
    Object.freeze(value);
  }
  return value;
}
