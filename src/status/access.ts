import type { Config } from '../config/schema.js';
import { isLoopback } from '../process/startup.js';

/*
 * Who may read the conversation's content on the status page (the summaries and trails the
 * gateway wrote: the person's own words, retold). A request that carries a gateway key may; else
 * only on a gateway that listens on loopback, asked for by a loopback name (so that a page of
 * another site whose name was pointed at 127.0.0.1 cannot read it through the browser).
 */

export interface ContentAccess {
  shown: boolean;
  /** Why, as a sentence for the page. */
  why: string;
}

/** Whether the gateway keeps content for the page at all: only where someone could be shown it. */
export function keepsContent(config: Readonly<Config>): boolean {
  return config.status.content && (config.auth.keys.length > 0 || isLoopback(config.server.host));
}

/** Whether this request is shown content. `keyed`: it carried a gateway key (checked before any route). */
export function contentAccess(config: Readonly<Config>, request: { keyed: boolean; host: string | undefined }): ContentAccess {
  const { host } = config.server;
  if (!config.status.content)
    return { shown: false, why: 'status.content is off (STATUS_CONTENT): the gateway keeps no summary or trail for this page' };
  if (request.keyed) return { shown: true, why: 'this request carries a gateway key' };
  if (!isLoopback(host)) {
    return {
      shown: false,
      why: `the gateway listens on ${host}, beyond loopback, and asks for no gateway key (auth.keys): content is shown only on loopback or with a key`,
    };
  }
  const asked = hostnameOf(request.host);
  if (asked === undefined || !isLoopback(asked)) {
    return {
      shown: false,
      why: `the page was asked for as ${JSON.stringify(request.host ?? '')}, not a loopback name (localhost, 127.0.0.1, [::1])`,
    };
  }
  return { shown: true, why: `the gateway listens on loopback (${host}) only` };
}

function hostnameOf(hostHeader: string | undefined): string | undefined {
  if (!hostHeader) return undefined;
  try {
    return new URL(`http://${hostHeader}`).hostname;
  } catch {
    return undefined;
  }
}
