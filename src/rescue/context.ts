import type { FastifyBaseLogger } from 'fastify';
import type { Dispatcher } from 'undici';
import type { Config } from '../config/schema.js';
import type { Dialect } from '../dialects/types.js';
import type { CompactionMemory } from '../memory/index.js';
import type { Metrics } from '../telemetry/metrics.js';
import type { ClientGone } from '../upstream/client-gone.js';
import type { Upstream, Upstreams } from '../upstream/upstreams.js';
import type { Windows } from '../upstream/windows.js';
import { rescueCost, type Release, type RescueBudget } from './budget.js';
import { MAX_RESCUED_ITEMS, type IncomingRequest } from './request.js';
import type { RescueRecord } from './report.js';

/** The request a decision was made for, as the status page names it. */
export interface Decided {
  requestId?: string;
  model?: string;
}

/** A stream the upstream cut that went to the client as it was: its prompt counted, and what was sent. */
export interface StreamedCut {
  api: Dialect['api'];
  upstream: string;
  reportedTokens: number;
  expectedTokens: number;
  bytes: number;
}

/** Where each decision goes once it is final (the status page's feed): one bounded append each. */
export interface Decisions {
  decided(record: RescueRecord, request: Decided): void;
  cutStreamed(cut: StreamedCut, request: Decided): void;
}

/** What every rescuable route shares: built once in server.ts. */
export interface RescueDeps {
  config: Readonly<Config>;
  dispatcher: Dispatcher;
  upstreams: Upstreams;
  metrics: Metrics;
  /** What the gateway remembers of past compactions; null when memory is off. */
  memory: CompactionMemory | null;
  /** Bytes of bodies under rescue at once, gateway-wide. */
  budget: RescueBudget;
  /** The context windows known before sending, and each model's bytes per token. */
  windows: Windows;
  /** The recent decisions the status page shows; none in tests that build the rescue alone. */
  decisions?: Decisions;
}

/** One request on its way through the rescue. */
export interface RescueContext {
  deps: RescueDeps;
  /** Where the request was routed: its URL, its own key, its memory, its summarizer. */
  upstream: Upstream;
  dialect: Dialect;
  /** The upstream path the request goes to (base path included) and its query. */
  path: string;
  incoming: IncomingRequest;
  /** The model the path names (Gemini), where the body does not. */
  pathModel?: string;
  /** The headers sent upstream (credentials already the gateway's or the client's). */
  headers: Record<string, string | string[]>;
  /** The client's own request headers, for the tenant and opt-out. */
  clientHeaders: Record<string, string | string[] | undefined>;
  log: FastifyBaseLogger;
  /** Fires when the client leaves: cancels upstream and summarizer work. */
  gone: ClientGone;
  requestId?: string;
  /** What the access log tells; `model` as routing read it (routes/body-model.ts), or at a glance. */
  notes: {
    compaction?: string;
    upstreamStatus?: number;
    upstreamTtfbMs?: number;
    streamed?: boolean;
    route?: string;
    model?: string;
    upstream?: string;
  };
  /** This request's share of the rescue budget while its body is read for a rescue (see holdBudget). */
  held?: Release;
}

/**
 * Holds the request's share of the rescue budget before its body is parsed (once: a proactive
 * compaction and the rescue after it share one); the estimated cost it asked for, and whether it
 * was given within `waitMs`. While it waits, its body counts.
 */
export async function holdBudget(ctx: RescueContext, waitMs: number): Promise<{ held: boolean; cost: number }> {
  if (ctx.held) return { held: true, cost: 0 };
  const shape = await ctx.incoming.shape();
  const cost = rescueCost(shape);
  const release = await ctx.deps.budget.hold(cost, waitMs, ctx.gone.signal, shape.bytes);
  if (release) ctx.held = release;
  return { held: release !== null, cost };
}

/** The header that marks a request as already handled by a gateway, or opts a request out. */
export const COMPACTION_HEADER = 'x-gateway-compaction';

export function optedOut(ctx: Pick<RescueContext, 'clientHeaders'>): boolean {
  return (
    String(ctx.clientHeaders[COMPACTION_HEADER] ?? '')
      .trim()
      .toLowerCase() === 'off'
  );
}

/** The request's own headers, marked; a changed body is plain JSON, whatever the client's encoding. */
export function markedHeaders(headers: Record<string, string | string[]>, header: string): Record<string, string | string[]> {
  const { 'content-encoding': _encoding, ...rest } = headers;
  return { ...rest, [COMPACTION_HEADER]: header };
}

/** The model the request names: in its path (Gemini), or its body's `model`. */
export function modelOf(ctx: Pick<RescueContext, 'pathModel' | 'incoming'>): string | undefined {
  if (ctx.pathModel) return ctx.pathModel;
  const json = ctx.incoming.json;
  return typeof json?.model === 'string' ? json.model : undefined;
}

/** Whether the request's longest top-level list (its conversation, whatever the API) is longer than MAX_RESCUED_ITEMS. */
export function tooManyItems(json: Record<string, unknown>): boolean {
  for (const value of Object.values(json)) if (Array.isArray(value) && value.length > MAX_RESCUED_ITEMS) return true;
  return false;
}
