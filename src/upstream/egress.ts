import { readFileSync } from 'node:fs';
import { BlockList, isIP } from 'node:net';
import { rootCertificates } from 'node:tls';
import { Agent, Dispatcher, ProxyAgent } from 'undici';
import { isHttpUrl, isProxyUrl } from '../config/schema.js';

/*
 * One pool per origin, straight or through a proxy: the origin's own `proxy` (`none`: never), else HTTPS_PROXY for https:// and
 * HTTP_PROXY for http:// (lower-case first; https:// without HTTPS_PROXY uses HTTP_PROXY) unless NO_PROXY lists the host. The rules
 * of undici's EnvHttpProxyAgent and curl, decided once per origin so the startup line says what the pool does.
 */

export interface EgressSettings {
  /** A proxy URL, `none`, or undefined: the environment decides. */
  proxy?: string;
  /** PEM CA certificates trusted for the origin, on top of Node's own (and NODE_EXTRA_CA_CERTS). */
  caFile?: string;
  connectTimeoutMs: number;
  firstByteTimeoutMs: number;
  idleTimeoutMs: number;
}

/** How traffic to one origin goes, as the startup line says it (a proxy's credentials never shown). */
export interface EgressRoute {
  via: string;
  /** Why: the upstream's own `proxy`, HTTPS_PROXY, HTTP_PROXY, NO_PROXY, or no proxy set. */
  because: string;
  /** The proxy's URL in full (credentials included): for the pool only. */
  proxyUrl?: string;
}

type Env = Record<string, string | undefined>;

export function egressRoute(origin: string, proxy: string | undefined, env: Env): EgressRoute {
  if (proxy === 'none') return { via: 'direct', because: 'proxy: none' };
  if (proxy !== undefined) return { via: new URL(proxy).origin, because: 'its proxy setting', proxyUrl: proxy };
  const url = new URL(origin);
  const http = envValue(env, 'http_proxy');
  const https = envValue(env, 'https_proxy');
  const chosen =
    url.protocol === 'https:'
      ? https
        ? { name: 'HTTPS_PROXY', url: https }
        : http
          ? { name: 'HTTP_PROXY', url: http }
          : null
      : http
        ? { name: 'HTTP_PROXY', url: http }
        : null;
  if (!chosen) return { via: 'direct', because: 'no HTTPS_PROXY or HTTP_PROXY set' };
  if (noProxyMatches(url, envValue(env, 'no_proxy') ?? '')) return { via: 'direct', because: 'NO_PROXY lists it' };
  return { via: isHttpUrl(chosen.url) ? new URL(chosen.url).origin : 'not a URL', because: chosen.name, proxyUrl: chosen.url };
}

/** A proxy variable this traffic takes whose value is not an http(s) origin URL (curl reads `proxy:3128` as http://, undici refuses it). */
export function proxyVariableProblem(origin: string, proxy: string | undefined, env: Env): string | undefined {
  const route = egressRoute(origin, proxy, env);
  if (!route.proxyUrl || proxy !== undefined || isProxyUrl(route.proxyUrl)) return undefined;
  const at = route.proxyUrl.lastIndexOf('@');
  const shown = (at < 0 ? route.proxyUrl : `[redacted]@${route.proxyUrl.slice(at + 1)}`).slice(0, 80);
  return `${route.because}: must be a proxy URL with no path, such as http://proxy:3128 (traffic to ${origin} goes through it); got ${JSON.stringify(shown)}`;
}

/** `no_proxy`, else `NO_PROXY` (the lower-case name first, as curl and undici read them). */
function envValue(env: Env, lower: string): string | undefined {
  const value = env[lower] ?? env[lower.toUpperCase()];
  return value === '' ? undefined : value;
}

/**
 * As curl reads it: `*`, or entries with an optional port, each a host name (subdomains too; a leading `.` or `*.` the same), an IP
 * address, or a CIDR block. No name is resolved: an upstream given by IP matches IP and CIDR entries, one given by name, names.
 */
export function noProxyMatches(url: URL, noProxy: string): boolean {
  if (noProxy.trim() === '*') return true;
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1').toLowerCase();
  const family = isIP(host);
  const port = Number.parseInt(url.port, 10) || (url.protocol === 'https:' ? 443 : 80);
  for (const entry of noProxy.split(/[,\s]/)) {
    if (!entry) continue;
    const { name, port: only } = entryParts(entry);
    if (only !== undefined && only !== port) continue;
    if (family !== 0 ? inBlock(host, family, name) : host === name || host.endsWith(`.${name}`)) return true;
  }
  return false;
}

/** An entry's host (or block) and port: `[::1]:8080`, a bare IPv6 address (no port), `host:port`. */
function entryParts(entry: string): { name: string; port?: number } {
  const bracketed = /^\[([^\]]+)\](?::(\d+))?$/.exec(entry);
  if (bracketed)
    return { name: bracketed[1].toLowerCase(), port: bracketed[2] === undefined ? undefined : Number.parseInt(bracketed[2], 10) };
  if (isIP(entry.replace(/\/\d{1,3}$/, '')) === 6) return { name: entry.toLowerCase() };
  const parsed = /^(.+):(\d+)$/.exec(entry);
  return {
    name: (parsed ? parsed[1] : entry).replace(/^\*?\./, '').toLowerCase(),
    port: parsed ? Number.parseInt(parsed[2], 10) : undefined,
  };
}

function inBlock(host: string, family: number, entry: string): boolean {
  const cidr = /^(.+)\/(\d{1,3})$/.exec(entry);
  const address = cidr ? cidr[1] : entry;
  if (isIP(address) !== family) return false;
  const type = family === 4 ? 'ipv4' : 'ipv6';
  const block = new BlockList();
  if (!cidr) block.addAddress(address, type);
  else if (Number(cidr[2]) <= (family === 4 ? 32 : 128)) block.addSubnet(address, Number(cidr[2]), type);
  else return false;
  return block.check(host, type);
}

function poolFor(route: EgressRoute, settings: EgressSettings, env: Env): Dispatcher {
  const tls = { timeout: settings.connectTimeoutMs, ...(settings.caFile ? { ca: trusted(settings.caFile, env) } : {}) };
  const common = {
    headersTimeout: settings.firstByteTimeoutMs,
    bodyTimeout: settings.idleTimeoutMs,
    keepAliveTimeout: 30_000,
    connections: null,
  };
  if (!route.proxyUrl) return new Agent({ connect: tls, ...common });
  // The upstream's TLS runs inside the tunnel; an https:// proxy's own connection trusts the same CAs.
  return new ProxyAgent({ uri: route.proxyUrl, requestTls: tls, proxyTls: tls, ...common });
}

/** A `ca` list replaces Node's default (bundled roots, NODE_EXTRA_CA_CERTS: often a TLS-inspecting proxy's): both kept, file added. */
function trusted(caFile: string, env: Env): string[] {
  const extra = env.NODE_EXTRA_CA_CERTS;
  let extraPem: string[] = [];
  try {
    extraPem = extra ? [readFileSync(extra, 'utf8')] : [];
  } catch {
    // Node itself warns about an unreadable NODE_EXTRA_CA_CERTS at startup and goes on without it.
  }
  return [...rootCertificates, ...extraPem, readFileSync(caFile, 'utf8')];
}

/** An origin it was not built with (none in the gateway's own traffic) goes by the environment with `fallback`'s settings. */
export class Egress extends Dispatcher {
  private readonly pools = new Map<string, Dispatcher>();
  readonly routes = new Map<string, EgressRoute>();

  constructor(
    origins: ReadonlyMap<string, EgressSettings>,
    private readonly fallback: EgressSettings,
    private readonly env: Env,
  ) {
    super();
    for (const [origin, settings] of origins) this.add(origin, settings);
  }

  routeOf(url: string): EgressRoute {
    const origin = new URL(url).origin;
    return this.routes.get(origin) ?? egressRoute(origin, this.fallback.proxy, this.env);
  }

  override dispatch(options: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler): boolean {
    // The gateway's own calls name origins as URL.origin wrote them: found as they are, unparsed.
    const given = typeof options.origin === 'string' ? options.origin : options.origin!.origin;
    const pool = this.pools.get(given);
    if (pool) return pool.dispatch(options, handler);
    const origin = new URL(given).origin;
    return (this.pools.get(origin) ?? this.add(origin, this.fallback)).dispatch(options, handler);
  }

  override close(): Promise<void>;
  override close(callback: () => void): void;
  override close(callback?: () => void): Promise<void> | void {
    const closed = Promise.all([...this.pools.values()].map((pool) => pool.close())).then(() => undefined);
    if (!callback) return closed;
    void closed.then(callback, callback);
  }

  override destroy(): Promise<void>;
  override destroy(err: Error | null): Promise<void>;
  override destroy(callback: () => void): void;
  override destroy(err: Error | null, callback: () => void): void;
  override destroy(a?: Error | null | (() => void), b?: () => void): Promise<void> | void {
    const err = typeof a === 'function' ? null : (a ?? null);
    const callback = typeof a === 'function' ? a : b;
    const destroyed = Promise.all([...this.pools.values()].map((pool) => pool.destroy(err))).then(() => undefined);
    if (!callback) return destroyed;
    void destroyed.then(callback, callback);
  }

  private add(origin: string, settings: EgressSettings): Dispatcher {
    const route = egressRoute(origin, settings.proxy, this.env);
    const pool = poolFor(route, settings, this.env);
    this.pools.set(origin, pool);
    this.routes.set(origin, route);
    return pool;
  }
}
