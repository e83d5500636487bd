import type { FastifyBaseLogger } from 'fastify';
import type { Config } from '../config/schema.js';

/*
 * Where the credentials a request carries may go on a summarizer call. The request's own
 * credentials (the gateway's upstream key, or the client's key) belong to the upstream: they go
 * to a summarizer only on the upstream's own origin. A summarizer anywhere else gets
 * `summarizer.apiKey`, or no credential at all.
 */

/** Whether two URLs share an origin: scheme, host and port (a scheme's default port as none). */
export function sameOrigin(a: string, b: string): boolean {
  try {
    return new URL(a).origin === new URL(b).origin;
  } catch {
    return false;
  }
}

/**
 * The warning for a summarizer that will get no credential, or undefined: `summarizer.url` on
 * another origin than `upstream.url`, and no `summarizer.apiKey`. Fit for the startup lines too.
 */
export function uncredentialedSummarizer(config: Readonly<Config>): string | undefined {
  const { url, apiKey } = config.summarizer;
  if (!url || apiKey || sameOrigin(url, config.upstream.url)) return undefined;
  return (
    `summarizer.url (${new URL(url).origin}) is not on the upstream's origin and summarizer.apiKey is not set: ` +
    'summarizer calls go there with no credential (the upstream key and the clients\' keys are never sent to another host); set SUMMARIZER_API_KEY if it needs one'
  );
}

const warned = new WeakSet<object>();

/** No credentials for the summarizer, said once per gateway (its config) when it first comes to it. */
export function noCredentials(config: Readonly<Config>, log: FastifyBaseLogger): Record<string, string> {
  const warning = uncredentialedSummarizer(config);
  if (warning && !warned.has(config)) {
    warned.add(config);
    log.warn({ summarizer: new URL(config.summarizer.url!).origin }, warning);
  }
  return {};
}
