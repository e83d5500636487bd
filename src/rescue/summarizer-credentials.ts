import type { FastifyBaseLogger } from 'fastify';
import type { Config } from '../config/schema.js';
import type { Api } from '../dialects/types.js';
import type { Upstream, Upstreams } from '../upstream/upstreams.js';

/*
 * Where the summaries of one upstream's compactions come from, and which credential goes with
 * them. By default the request's own upstream and model, with the request's own credentials (the
 * upstream's key, or the client's). An upstream's `summarizer` may name another upstream (its
 * URL and its own key) or a URL; the global `summarizer` section fills what it leaves unset. The
 * request's credentials belong to its upstream: they go to a summarizer only on that upstream's
 * origin. A summarizer anywhere else gets its own key, or none at all.
 */

export interface SummarizerDestination {
  url: string;
  /** The API set for it; undefined: the request's own, where the summarizer serves it. */
  api?: Api;
  model?: string;
  /** How the call is credentialed: a key of its own, the request's credentials, or none. */
  credential: { kind: 'key'; key: string } | { kind: 'request' } | { kind: 'none' };
  upstream?: Upstream;
}

/** Whether two URLs share an origin: scheme, host and port (a scheme's default port as none). */
function sameOrigin(a: string, b: string): boolean {
  try {
    return new URL(a).origin === new URL(b).origin;
  } catch {
    return false;
  }
}

export function summarizerDestination(config: Readonly<Config>, upstreams: Upstreams, own: Upstream): SummarizerDestination {
  const global = config.summarizer;
  const choice = own.summarizer;
  const named = choice.upstream !== undefined ? upstreams.named(choice.upstream) : undefined;
  // A destination of the upstream's own replaces the global one whole: its URL, and the key that goes there.
  const url = named?.url ?? choice.url ?? global.url ?? own.url;
  const ownDestination = named === undefined && choice.url === undefined;
  const key = choice.apiKey ?? (named ? named.apiKey : ownDestination ? global.apiKey : undefined);
  const api = choice.api ?? (ownDestination ? global.api : undefined);
  const model = choice.model ?? global.model;
  const credential: SummarizerDestination['credential'] = key
    ? { kind: 'key', key }
    : named === own || sameOrigin(url, own.url)
      ? { kind: 'request' }
      : { kind: 'none' };
  return { url, api, model, credential, upstream: named ?? (url === own.url ? own : undefined) };
}

/** Each upstream's summarizer model where the config names one, for its metrics to start at zero; a request's own model is known when it comes. */
export function configuredSummarizers(config: Readonly<Config>, upstreams: Upstreams): Array<{ upstream: string; model: string }> {
  if (config.compaction.strategy === 'fallback') return [];
  return upstreams.all.flatMap((u) => {
    const { model } = summarizerDestination(config, upstreams, u);
    return model ? [{ upstream: u.name, model }] : [];
  });
}

/** The warning for a summarizer that gets no credential, or undefined. Said at startup and when first used. */
export function uncredentialedSummarizer(own: Upstream, destination: SummarizerDestination): string | undefined {
  if (destination.credential.kind !== 'none') return undefined;
  const where = destination.upstream
    ? `upstream ${destination.upstream.name} (${new URL(destination.url).origin})`
    : new URL(destination.url).origin;
  return (
    `the summarizer of upstream ${own.name} is ${where}, which is not on ${own.name}'s origin and has no key of its own: ` +
    "summarizer calls go there with no credential (an upstream's key and the clients' keys are never sent to another host); " +
    'give it an apiKey (summarizer.apiKey, SUMMARIZER_API_KEY, or the apiKey of the upstream it names) if it needs one'
  );
}

const warned = new WeakMap<object, Set<string>>();

/** No credentials for the summarizer, said once per gateway (its config) and upstream when it first comes to it. */
export function noCredentials(
  config: Readonly<Config>,
  own: Upstream,
  destination: SummarizerDestination,
  log: FastifyBaseLogger,
): Record<string, string> {
  const warning = uncredentialedSummarizer(own, destination);
  const said = warned.get(config) ?? new Set<string>();
  warned.set(config, said);
  if (warning && !said.has(own.name)) {
    said.add(own.name);
    log.warn({ upstream: own.name, summarizer: new URL(destination.url).origin }, warning);
  }
  return {};
}
