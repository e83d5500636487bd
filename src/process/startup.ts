import { BlockList, isIP, type AddressInfo } from 'node:net';
import { redisTargetOf } from '../memory/redis-target.js';
import { describeRedisTarget } from '../memory/redis-wording.js';
import type { Config } from '../config/schema.js';
import { APIS, DIALECTS, type Api } from '../dialects/index.js';
import { summarizerDestination, uncredentialedSummarizer } from '../rescue/summarizer-credentials.js';
import { egressRoute } from '../upstream/egress.js';
import { resolveUpstreams, type Upstream, type Upstreams } from '../upstream/upstreams.js';

/**
 * The first log lines: base URLs for agents, the config in force, where every upstream's requests go, what may surprise. Never a
 * credential.
 */
export function startupFields(
  config: Readonly<Config>,
  source: string | undefined,
  running: { gateway: string; node: string; origin?: string },
  env: Record<string, string | undefined> = process.env,
) {
  const { memory } = config;
  const upstreams = resolveUpstreams(config);
  const { origin } = running;
  const unprefixed = origin ? agentBaseUrls(origin, '', unprefixedApis(config, upstreams)) : {};
  return {
    ...(Object.keys(unprefixed).length > 0 ? { baseUrls: unprefixed } : {}),
    config: source ?? 'defaults (no config file)',
    upstreams: upstreams.all.map((u) => ({
      ...upstreamLine(config, upstreams, u, env),
      ...(origin ? { baseUrls: agentBaseUrls(origin, `/${u.name}`, u.apis) } : {}),
    })),
    defaultUpstream: upstreams.fallback?.name ?? 'none (a request no prefix or route sends anywhere gets 404 no_upstream)',
    ...(config.routes.length > 0
      ? {
          routes: config.routes.map(
            (r) =>
              `${[r.api && `api ${r.api}`, r.model && `model ${r.model}`, r.unknownModel && 'a model it cannot read'].filter(Boolean).join(', ')} -> ${r.upstream}`,
          ),
        }
      : {}),
    auth: config.auth.keys.length > 0 ? `on (${config.auth.keys.length} gateway key${config.auth.keys.length > 1 ? 's' : ''})` : 'off',
    compaction: config.compaction.maxReplays === 0 ? 'off (maxReplays 0)' : config.compaction.strategy,
    memory: memoryLine(memory),
    proactive: config.compaction.proactive,
    version: running.gateway,
    node: running.node,
  };
}

/** The base URL each kind of agent is given, for the APIs served there, as their dialects say (`clientBaseUrl`). */
function agentBaseUrls(origin: string, prefix: string, apis: ReadonlySet<Api>): Record<string, string> {
  const urls: Record<string, string> = {};
  for (const api of APIS.filter((a) => apis.has(a))) {
    const { clientBaseUrl, prefix: apiPrefix } = DIALECTS[api];
    urls[clientBaseUrl.name] ??= `${origin}${prefix}${clientBaseUrl.withPrefix ? apiPrefix : ''}`;
  }
  return urls;
}

/** The APIs a request without a prefix can be served in: the default upstream's, and those a route sends somewhere that serves them. */
function unprefixedApis(config: Readonly<Config>, upstreams: Upstreams): Set<Api> {
  const apis = new Set<Api>(upstreams.fallback?.apis ?? []);
  for (const route of config.routes) {
    const served = upstreams.named(route.upstream)?.apis ?? new Set<Api>();
    for (const api of served) if (route.api === undefined || route.api === api) apis.add(api);
  }
  return apis;
}

/**
 * A wildcard address (0.0.0.0, ::) is shown as 127.0.0.1: it serves there too, and a host name or another interface's address may not
 * reach it (a container's name, a NAT). Undefined for a pipe.
 */
export function listeningOrigin(address: AddressInfo | string | null): string | undefined {
  if (address === null || typeof address === 'string') return undefined;
  const wildcard = address.address === '0.0.0.0' || address.address === '::';
  const host = wildcard ? '127.0.0.1' : address.address.includes(':') ? `[${address.address}]` : address.address;
  return `http://${host}:${address.port}`;
}

/**
 * A port in use may free itself (an old process draining): exit 1, which a supervisor retries; the other failures need a config
 * change: exit 2.
 */
export function listenFailure(
  err: NodeJS.ErrnoException,
  server: Readonly<Config['server']>,
): { line: string; exitCode: number } | undefined {
  const why = LISTEN_FAILURES[err.code ?? ''];
  if (!why) return undefined;
  const line = `cannot listen on ${server.host} port ${server.port} (server.host HOST, server.port PORT): ${why}`;
  return { line, exitCode: err.code === 'EADDRINUSE' ? 1 : 2 };
}

const LISTEN_FAILURES: Record<string, string> = {
  EADDRINUSE: 'the port is in use by another process; stop it, or set PORT to a free port',
  EACCES: 'permission denied (a port below 1024 needs privileges; the image uses 8080)',
  EADDRNOTAVAIL: 'this machine has no such address; use one of its own, 0.0.0.0 or 127.0.0.1',
  ENOTFOUND: 'the host name does not resolve',
  EAI_AGAIN: 'the host name could not be resolved now (DNS)',
};

function upstreamLine(config: Readonly<Config>, upstreams: Upstreams, u: Upstream, env: Record<string, string | undefined>) {
  const route = egressRoute(u.target.origin, u.proxy, env);
  const summarizer = summarizerDestination(config, upstreams, u);
  const summarizerUrl =
    summarizer.upstream && summarizer.upstream !== u
      ? `upstream ${summarizer.upstream.name}`
      : summarizer.url === u.url
        ? "the request's own upstream"
        : loggableUrl(summarizer.url);
  return {
    name: u.name,
    url: loggableUrl(u.url),
    prefix: `/${u.name}`,
    apis: [...u.apis].join(','),
    key: u.apiKey
      ? `the gateway's own (${u.apiKeyKey})`
      : config.auth.keys.length > 0
        ? 'none (clients present gateway keys, which go no further)'
        : "the client's",
    proxy: route.via === 'direct' ? `direct (${route.because})` : `${route.via} (${route.because})`,
    ...(u.caFile ? { caFile: u.caFile } : {}),
    summarizer:
      config.compaction.strategy === 'fallback'
        ? 'none (strategy fallback)'
        : `${summarizerUrl}, ${summarizer.model ? `model ${summarizer.model}` : "the request's model"}${summarizer.api ? `, ${summarizer.api} API` : ''}`,
  };
}

/**
 * Provider key, no gateway key, beyond loopback: anyone reaching the port spends the key (the image binds 0.0.0.0).
 * `auth.allowOpen` says it on purpose.
 */
export function openGatewayRefusal(config: Readonly<Config>): string | undefined {
  if (!isOpenGateway(config) || config.auth.allowOpen) return undefined;
  const { host } = config.server;
  return (
    `refusing to start an open gateway: it holds a provider key (${providerKeys(config).join(', ')}), asks clients for no key ` +
    `(auth.keys, GATEWAY_API_KEYS, is empty) and listens on ${host} (server.host, HOST), beyond loopback: ` +
    `anyone who reaches ${portOf(config)} could spend the provider key. Do one of: ` +
    'set GATEWAY_API_KEYS to one or more comma-separated keys (auth.keys), which clients present as their Bearer token, x-api-key or x-goog-api-key; ' +
    'listen on loopback only: HOST=127.0.0.1 (server.host); ' +
    'or serve it open on purpose (a private network, an authenticating proxy in front): GATEWAY_ALLOW_OPEN=1 (auth.allowOpen: true)'
  );
}

const portOf = (config: Readonly<Config>) => (config.server.port === 0 ? 'its port' : `port ${config.server.port}`);

/** A provider key (an upstream's, a summarizer's), no gateway key, and an address beyond loopback. */
function isOpenGateway(config: Readonly<Config>): boolean {
  return providerKeys(config).length > 0 && config.auth.keys.length === 0 && !isLoopback(config.server.host);
}

/** The config keys that hold a provider key the gateway would spend on a client's behalf. */
function providerKeys(config: Readonly<Config>): string[] {
  const keys = resolveUpstreams(config)
    .all.filter((u) => u.apiKey)
    .map((u) => u.apiKeyKey);
  if (config.summarizer.apiKey) keys.push('summarizer.apiKey');
  for (const [name, u] of Object.entries(config.upstreams ?? {}))
    if (u.summarizer?.apiKey) keys.push(`upstreams.${name}.summarizer.apiKey`);
  return keys;
}

const LOOPBACK = new BlockList();
LOOPBACK.addSubnet('127.0.0.0', 8, 'ipv4');
LOOPBACK.addAddress('::1', 'ipv6');

/** 127.0.0.0/8 (IPv4-mapped too), ::1 or localhost. A host name is not resolved here: only `localhost` counts. */
export function isLoopback(host: string): boolean {
  const bare = host.replace(/^\[(.*)\]$/, '$1');
  if (bare.toLowerCase() === 'localhost') return true;
  const family = isIP(bare);
  return family !== 0 && LOOPBACK.check(bare, family === 4 ? 'ipv4' : 'ipv6');
}

/** Settings that start fine but will probably not do what was meant, each as a sentence. */
export function startupWarnings(config: Readonly<Config>): string[] {
  const warnings: string[] = [];
  if (isOpenGateway(config) && config.auth.allowOpen) {
    warnings.push(
      `open gateway: anyone who reaches ${portOf(config)} on ${config.server.host} is served with the provider key (upstream.apiKey), ` +
        'without a gateway key, because auth.allowOpen (GATEWAY_ALLOW_OPEN) is set. Set GATEWAY_API_KEYS to require one.',
    );
  }
  const upstreams = resolveUpstreams(config);
  const urls: Array<[string, string | undefined]> = [
    ...upstreams.all
      // An upstream whose APIs' base URL is the origin (Gemini's alone) needs no version path.
      .filter((u) => u.apis.size === 0 || [...u.apis].some((api) => DIALECTS[api].upstreamBaseHoldsPrefix))
      .map((u): [string, string] => [
        u.name === 'default' && !config.upstreams?.default ? 'upstream.url' : `upstreams.${u.name}.url`,
        u.url,
      ]),
    ['summarizer.url', config.summarizer.url],
  ];
  for (const [key, url] of urls) {
    if (url && new URL(url).pathname.replace(/\/+$/, '') === '') {
      warnings.push(
        `${key} ${loggableUrl(url)} has no version path: requests will go to ${loggableUrl(url).replace(/\/+$/, '')}/chat/completions. ` +
          "Most providers need the /v1 (or their own version path) in the base URL; the Gemini API's is its origin, for Gemini clients.",
      );
    }
  }
  for (const u of upstreams.all) {
    const warning =
      config.compaction.strategy === 'fallback' ? undefined : uncredentialedSummarizer(u, summarizerDestination(config, upstreams, u));
    if (warning) warnings.push(warning);
    if (config.auth.keys.length > 0 && !u.apiKey && config.upstreams) {
      warnings.push(
        `upstream ${u.name} has no apiKey and gateway keys are on: its requests go with no credential (a gateway key is never sent on): right for an upstream that needs none (a local model), not for one that does.`,
      );
    }
  }
  return warnings;
}

export function memoryLine(memory: Readonly<Config['memory']>): string {
  if (!memory.enabled) return 'off';
  const redis = redisTargetOf(memory);
  return redis ? describeRedisTarget(redis) : 'local (in-process)';
}

/** A URL without what may hold a secret: userinfo (`https://user:key@host`) and the query (`?api-key=`). */
export function loggableUrl(url: string): string {
  const parsed = new URL(url);
  return `${parsed.origin}${parsed.pathname}`;
}
