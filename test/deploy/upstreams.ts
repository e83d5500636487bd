// What the deploy tests ask of a deploy file's gateway config beyond the gateway's own loader: which
// variables the file makes the gateway read, and whether every upstream it names exists and can be
// reached by name from where the gateway runs (a compose container, a pod).
import { isIP } from 'node:net';
import { parse as parseYaml } from 'yaml';
import { expandVariables } from '../../src/config/expand.js';
import type { Config } from '../../src/config/schema.js';
import { resolveUpstreams, type Upstreams } from '../../src/upstream/upstreams.js';

/**
 * The variables a config file's values name as `${NAME}` or `${NAME:-default}`: the gateway reads
 * them too. Found by the gateway's own expander, given an environment that records what it is asked
 * for, so a comment, a key or a literal `$${` names nothing here either.
 */
export function variablesNamedIn(text: string): Set<string> {
  const names = new Set<string>();
  const recording = new Proxy(
    {},
    {
      get: (_, name) => {
        if (typeof name === 'string') names.add(name);
        return 'set';
      },
    },
  );
  let tree: unknown;
  try {
    tree = parseYaml(text);
  } catch {
    return names; // The loader says what is wrong with the file.
  }
  if (typeof tree === 'object' && tree !== null && !Array.isArray(tree)) {
    expandVariables(tree as Record<string, unknown>, recording, new Set(), (_, value) => value);
  }
  return names;
}

/** Why a host does not resolve where the gateway runs, or undefined when it does. */
export type HostCheck = (host: string) => string | undefined;

/**
 * Every upstream the config names (routes, defaultUpstream, a summarizer's upstream) is one
 * resolveUpstreams builds, and every URL the gateway sends to (each upstream's, each summarizer's)
 * has a host that `hostCheck` accepts.
 */
export function upstreamProblems(config: Readonly<Config>, hostCheck: HostCheck): { upstreams: Upstreams; problems: string[] } {
  const upstreams = resolveUpstreams(config);
  const known = upstreams.all.map((u) => u.name).join(', ');
  const named: Array<[key: string, name: string]> = config.routes.map((r, i) => [`routes.${i}.upstream`, r.upstream]);
  if (config.defaultUpstream !== undefined) named.push(['defaultUpstream', config.defaultUpstream]);
  const urls: Array<[what: string, url: string]> = upstreams.all.map((u) => [`upstream ${u.name}`, u.url]);
  if (config.summarizer.url) urls.push(['summarizer.url', config.summarizer.url]);
  for (const [name, u] of Object.entries(config.upstreams ?? {})) {
    if (u.summarizer?.upstream !== undefined) named.push([`upstreams.${name}.summarizer.upstream`, u.summarizer.upstream]);
    if (u.summarizer?.url) urls.push([`upstreams.${name}.summarizer.url`, u.summarizer.url]);
  }
  const problems: string[] = [];
  for (const [key, name] of named) if (!upstreams.named(name)) problems.push(`${key}: ${name} is none of the upstreams (${known})`);
  for (const [what, url] of urls) {
    const { hostname, origin } = new URL(url);
    const why = hostCheck(hostname.replace(/^\[(.*)\]$/, '$1'));
    if (why) problems.push(`${what} (${origin}): ${why}`);
  }
  return { upstreams, problems };
}

function isLoopbackHost(host: string): boolean {
  return host === 'localhost' || host === '::1' || /^127\./.test(host);
}

/** A single-label name (`redis`, `vllm`): one the platform's own DNS must answer (a service). */
export function isServiceName(host: string): boolean {
  return isIP(host) === 0 && !host.includes('.');
}

/**
 * Hosts from the gateway service in `docker-compose config` output: a compose service's name, an
 * extra_hosts entry, or a dotted public name. Loopback is the gateway's own container, where no
 * model listens; host.docker.internal exists on Linux only through extra_hosts.
 */
export function composeHostCheck(services: Record<string, unknown>, gateway: { extra_hosts?: unknown }): HostCheck {
  const extra = new Set(
    Array.isArray(gateway.extra_hosts)
      ? gateway.extra_hosts.map((e) => String(e).split(':')[0])
      : Object.keys((gateway.extra_hosts as object | undefined) ?? {}),
  );
  return (host) => {
    if (extra.has(host)) return undefined;
    if (isLoopbackHost(host)) return "loopback is the gateway's own container, where nothing else listens";
    if (host === 'host.docker.internal')
      return 'needs extra_hosts "host.docker.internal:host-gateway" on the gateway service (only Docker Desktop has it without)';
    if (isServiceName(host) && !(host in services)) return `names no service (the services are ${Object.keys(services).join(', ')})`;
    return undefined;
  };
}
