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

export interface Decided {
  requestId?: string;
  model?: string;
}

export interface StreamedCut {
  api: Dialect['api'];
  upstream: string;
  reportedTokens: number;
  expectedTokens: number;
  bytes: number;
}

export interface Decisions {
  decided(record: RescueRecord, request: Decided): void;
  cutStreamed(cut: StreamedCut, request: Decided): void;
}

export interface RescueDeps {
  config: Readonly<Config>;
  dispatcher: Dispatcher;
  upstreams: Upstreams;
  metrics: Metrics;
  memory: CompactionMemory | null;
  budget: RescueBudget;
  windows: Windows;
  decisions?: Decisions;
}

export interface RescueContext {
  deps: RescueDeps;
  upstream: Upstream;
  dialect: Dialect;
  /** Base path included. */
  path: string;
  incoming: IncomingRequest;
  pathModel?: string;
  headers: Record<string, string | string[]>;
  clientHeaders: Record<string, string | string[] | undefined>;
  log: FastifyBaseLogger;
  gone: ClientGone;
  requestId?: string;
  notes: {
    compaction?: string;
    upstreamStatus?: number;
    upstreamTtfbMs?: number;
    streamed?: boolean;
    route?: string;
    model?: string;
    upstream?: string;
  };
  held?: Release;
}

/** Once: a proactive compaction and the rescue after it share one. While it waits, its body counts. */
export async function holdBudget(ctx: RescueContext, waitMs: number): Promise<{ held: boolean; cost: number }> {
  if (ctx.held) return { held: true, cost: 0 };
  const shape = await ctx.incoming.shape();
  const cost = rescueCost(shape);
  const release = await ctx.deps.budget.hold(cost, waitMs, ctx.gone.signal, shape.bytes);
  if (release) ctx.held = release;
  return { held: release !== null, cost };
}

export const COMPACTION_HEADER = 'x-gateway-compaction';

export function optedOut(ctx: Pick<RescueContext, 'clientHeaders'>): boolean {
  return (
    String(ctx.clientHeaders[COMPACTION_HEADER] ?? '')
      .trim()
      .toLowerCase() === 'off'
  );
}

/** A changed body is plain JSON, whatever the client's encoding. */
export function markedHeaders(headers: Record<string, string | string[]>, header: string): Record<string, string | string[]> {
  const { 'content-encoding': _encoding, ...rest } = headers;
  return { ...rest, [COMPACTION_HEADER]: header };
}

export function modelOf(ctx: Pick<RescueContext, 'pathModel' | 'incoming'>): string | undefined {
  if (ctx.pathModel) return ctx.pathModel;
  const json = ctx.incoming.json;
  return typeof json?.model === 'string' ? json.model : undefined;
}

export function tooManyItems(json: Record<string, unknown>): boolean {
  for (const value of Object.values(json)) if (Array.isArray(value) && value.length > MAX_RESCUED_ITEMS) return true;
  return false;
}
