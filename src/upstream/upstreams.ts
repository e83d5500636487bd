import { APIS, DIALECTS, apiOfPath, type Api } from '../dialects/index.js';
import { DEFAULTS, type Config } from '../config/schema.js';
import { GatewayError } from '../http/errors.js';
import { parseTarget, type UpstreamTarget } from './target.js';
import { pathOf } from '../lib/url.js';

/*
 * A request finds its upstream by a path prefix (`/anthropic/v1/messages` is `/v1/messages` against `anthropic`), then the first
 * matching `routes` entry, then `defaultUpstream`; a single-upstream config is one named `default`. The gateway never translates
 * between APIs: a route matches only an upstream that serves the request's API.
 */

/** Where a summarizer call goes for one upstream's compactions, when not to the request's own upstream and model. */
interface SummarizerChoice {
  upstream?: string;
  url?: string;
  api?: Api;
  model?: string;
  apiKey?: string;
}

export interface Upstream {
  name: string;
  url: string;
  target: UpstreamTarget;
  /** The gateway's own key for it; without one, the client's credentials go as sent. */
  apiKey?: string;
  /** The config key that holds its key, for the startup line (never the key). */
  apiKeyKey: string;
  apis: ReadonlySet<Api>;
  connectTimeoutMs: number;
  firstByteTimeoutMs: number;
  idleTimeoutMs: number;
  /** A forward proxy's URL, `none`, or undefined: as HTTPS_PROXY / HTTP_PROXY / NO_PROXY say. */
  proxy?: string;
  caFile?: string;
  summarizer: SummarizerChoice;
  /** What memory and learned limits are keyed by: its name and its URL (a name moved elsewhere starts afresh). */
  memoryKey: string;
  windows: readonly DeclaredWindow[];
  discoverWindows: boolean;
}

interface DeclaredWindow {
  model: RegExp;
  glob: string;
  tokens: number;
  completionCounted: boolean;
}

export interface RouteRule {
  api?: Api;
  model?: RegExp;
  /** Matches only a request whose model could not be read. */
  unknownModel?: boolean;
  upstream: Upstream;
}

/** A body that should name a model and whose model could not be read: why, for the client. */
interface UnknownModel {
  unreadable: string;
}

/** The body's top-level `model` (routes/body-model.ts) or the path's; undefined for a request naming none by nature (a GET, no body). */
export type RequestModel = string | UnknownModel | undefined;

/** Why no upstream serves a request: a sentence for the client, in its API's error shape; `unknownModel` when it is refused for a model it could not read. */
export interface NoUpstream {
  refused: string;
  unknownModel?: boolean;
}

export class Upstreams {
  readonly all: readonly Upstream[];
  private readonly byName: ReadonlyMap<string, Upstream>;

  constructor(
    upstreams: readonly Upstream[],
    private readonly rules: readonly RouteRule[],
    readonly fallback: Upstream | undefined,
  ) {
    this.all = upstreams;
    this.byName = new Map(upstreams.map((u) => [u.name, u]));
  }

  named(name: string): Upstream | undefined {
    return this.byName.get(name);
  }

  get readsModel(): boolean {
    return this.rules.some((r) => r.model !== undefined || r.unknownModel);
  }

  /**
   * `api` undefined (`/v1/models`, `/v1/files`): only the default serves it. A model that could not be read is never guessed: it matches
   * no glob, and where a rule would have read it, only a rule for unknown models places it.
   */
  pick(api: Api | undefined, model: RequestModel): Upstream | NoUpstream {
    if (api !== undefined) {
      for (const rule of this.rules) {
        if (rule.api !== undefined && rule.api !== api) continue;
        if (rule.model !== undefined && (typeof model !== 'string' || !rule.model.test(model))) continue;
        if (rule.unknownModel && !isUnknown(model)) continue;
        if (rule.upstream.apis.has(api)) return rule.upstream;
      }
      if (
        isUnknown(model) &&
        this.rules.some((r) => r.model !== undefined && (r.api === undefined || r.api === api) && r.upstream.apis.has(api))
      ) {
        return {
          refused: `This gateway routes the ${DIALECTS[api].title} API by model, and could not read this request's model: ${model.unreadable}. Send the model as a top-level string "model" in a JSON body.`,
          unknownModel: true,
        };
      }
    }
    const fallback = this.fallback;
    if (fallback && (api === undefined || fallback.apis.has(api))) return fallback;
    return { refused: this.noneServes(api, typeof model === 'string' ? model : undefined) };
  }

  prefixed(upstream: Upstream, api: Api | undefined): Upstream | NoUpstream {
    if (api === undefined || upstream.apis.has(api)) return upstream;
    return {
      refused: `The upstream ${upstream.name} does not serve the ${DIALECTS[api].title} API (it serves ${[...upstream.apis].map((a) => DIALECTS[a].title).join(', ')}). ${this.servedBy(api)}`,
    };
  }

  private noneServes(api: Api | undefined, model: string | undefined): string {
    const what =
      api === undefined ? 'this path' : `the ${DIALECTS[api].title} API${model ? ` for the model ${JSON.stringify(model)}` : ''}`;
    const why = this.fallback
      ? `the default upstream, ${this.fallback.name}, does not serve it and no route matches`
      : 'no route matches and no defaultUpstream is set';
    return `No upstream of this gateway serves ${what}: ${why}. ${api ? this.servedBy(api) : ''}`.trim();
  }

  private servedBy(api: Api): string {
    const serving = this.all.filter((u) => u.apis.has(api)).map((u) => `/${u.name}${DIALECTS[api].prefix}`);
    return serving.length > 0 ? `Base URLs that serve it here: ${serving.join(', ')}.` : 'No upstream here serves it.';
  }
}

/** The gateway's answer to a request no upstream takes: 400 for a model it could not read, else 404. */
export function refusal(no: NoUpstream): GatewayError {
  return new GatewayError(no.unknownModel ? 'model_unreadable' : 'no_upstream', no.refused);
}

function isUnknown(model: RequestModel): model is UnknownModel {
  return typeof model === 'object';
}

export function resolveUpstreams(config: Readonly<Config>): Upstreams {
  const shared = config.upstream;
  const list: Upstream[] = [];
  const implicit = config.upstreams === undefined || shared.url !== undefined;
  if (implicit) {
    const url = shared.url ?? DEFAULTS.upstreamUrl;
    list.push({
      name: 'default',
      url,
      target: parseTarget(url),
      apiKey: shared.apiKey,
      apiKeyKey: 'upstream.apiKey',
      apis: new Set(APIS),
      connectTimeoutMs: shared.connectTimeoutMs,
      firstByteTimeoutMs: shared.firstByteTimeoutMs,
      idleTimeoutMs: shared.idleTimeoutMs,
      proxy: shared.proxy,
      caFile: shared.caFile,
      summarizer: {},
      // As before named upstreams: what a single-upstream gateway remembered stays found.
      memoryKey: url,
      windows: declared(shared.windows),
      discoverWindows: shared.discoverWindows,
    });
  }
  for (const [name, u] of Object.entries(config.upstreams ?? {})) {
    list.push({
      name,
      url: u.url,
      target: parseTarget(u.url),
      apiKey: u.apiKey,
      apiKeyKey: `upstreams.${name}.apiKey`,
      apis: new Set(u.apis ?? APIS),
      connectTimeoutMs: u.connectTimeoutMs ?? shared.connectTimeoutMs,
      firstByteTimeoutMs: u.firstByteTimeoutMs ?? shared.firstByteTimeoutMs,
      idleTimeoutMs: u.idleTimeoutMs ?? shared.idleTimeoutMs,
      proxy: u.proxy ?? shared.proxy,
      caFile: u.caFile ?? shared.caFile,
      summarizer: u.summarizer ?? {},
      memoryKey: `${name}\0${u.url}`,
      windows: declared(u.windows),
      discoverWindows: u.discoverWindows ?? shared.discoverWindows,
    });
  }
  const byName = new Map(list.map((u) => [u.name, u]));
  const rules = config.routes.map((r) => ({
    api: r.api,
    model: r.model === undefined ? undefined : globPattern(r.model),
    unknownModel: r.unknownModel,
    upstream: byName.get(r.upstream)!,
  }));
  const fallbackName = config.defaultUpstream ?? (byName.has('default') ? 'default' : list.length === 1 ? list[0].name : undefined);
  return new Upstreams(list, rules, fallbackName === undefined ? undefined : byName.get(fallbackName));
}

function declared(windows: Config['upstream']['windows']): DeclaredWindow[] {
  return (windows ?? []).map((w) => ({
    model: globPattern(w.model),
    glob: w.model,
    tokens: w.tokens,
    completionCounted: w.completionCounted ?? true,
  }));
}

/** `qwen*` as a whole-string pattern: `*` any run of characters, `?` one, everything else itself. */
export function globPattern(glob: string): RegExp {
  const body = glob
    .replace(/[.+^${}()|[\]\\]/g, '\\$&')
    .replace(/\*/g, '.*')
    .replace(/\?/g, '.');
  return new RegExp(`^${body}$`, 's');
}

/** `/anthropic/v1/messages` is `/v1/messages` against `anthropic`; null when the first segment names none. */
export function byPrefix(upstreams: Upstreams, path: string): { upstream: Upstream; rest: string } | null {
  const end = path.indexOf('/', 1);
  if (end < 0) return null;
  const upstream = upstreams.named(path.slice(1, end));
  return upstream ? { upstream, rest: path.slice(end) } : null;
}

/** The API a request's URL belongs to, under an upstream's prefix or not: whose error shape the gateway's own errors take. */
export function apiOfUrl(upstreams: Upstreams, url: string): Api | undefined {
  const path = pathOf(url);
  return apiOfPath(byPrefix(upstreams, path)?.rest ?? path);
}
