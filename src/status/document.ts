import type { Config } from '../config/schema.js';
import type { Api } from '../dialects/types.js';
import type { Metrics } from '../telemetry/metrics.js';
import { loggableUrl, memoryLine } from '../process/startup.js';
import { apiOfPath } from '../dialects/index.js';
import type { Upstreams } from '../upstream/upstreams.js';
import type { LearnedModel, Windows } from '../upstream/windows.js';
import type { ContentAccess } from './access.js';
import type { StatusEntry } from './entry.js';
import type { RecentDecisions, Tally } from './recent.js';

/*
 * GET /status.json, and what the page shows: what the gateway is, what it did since it started,
 * and its last decisions. Never a credential, a key or a header value; the conversation's content
 * only when `access` says so.
 */

export interface StatusSources {
  config: Readonly<Config>;
  upstreams: Upstreams;
  windows: Windows;
  metrics: Metrics;
  recent: RecentDecisions;
  version: string;
  startedAt: Date;
  /** The port it listens on, once it does (server.port may be 0). */
  port?: () => number | undefined;
}

export interface UpstreamStatus {
  name: string;
  /** Without userinfo or query (either may hold a key). */
  url: string;
  apis: Api[];
  windows: {
    declared: Array<{ model: string; tokens: number; completionCounted: boolean }>;
    discover: boolean;
    learned: LearnedModel[];
  };
}

export interface StatusDocument {
  gateway: {
    version: string;
    startedAt: string;
    uptimeSeconds: number;
    listening: string;
    auth: { gatewayKeys: boolean; metricsKey: boolean };
    memory: string;
    compaction: string;
    proactive: boolean;
  };
  content: ContentAccess;
  upstreams: UpstreamStatus[];
  /** Per upstream and API: requests answered, and what the rescue did. */
  totals: Array<Tally & { requests: number }>;
  recent: { capacity: number; decisions: number; entries: StatusEntry[] };
}

/** Learned models listed per upstream at most. */
const LEARNED_MAX = 20;

export async function statusDocument(s: StatusSources, access: ContentAccess, now = new Date()): Promise<StatusDocument> {
  const { config } = s;
  const entries = s.recent.entries();
  return {
    gateway: {
      version: s.version,
      startedAt: s.startedAt.toISOString(),
      uptimeSeconds: Math.round((now.getTime() - s.startedAt.getTime()) / 1000),
      listening: `${config.server.host}:${s.port?.() ?? config.server.port}`,
      auth: { gatewayKeys: config.auth.keys.length > 0, metricsKey: config.auth.metricsKey !== undefined },
      memory: memoryLine(config.memory),
      compaction: config.compaction.maxReplays === 0 ? 'off (maxReplays 0)' : config.compaction.strategy,
      proactive: config.compaction.proactive,
    },
    content: access,
    upstreams: s.upstreams.all.map((u) => ({
      name: u.name,
      url: loggableUrl(u.url),
      apis: [...u.apis],
      windows: {
        declared: u.windows.map((w) => ({ model: w.glob, tokens: w.tokens, completionCounted: w.completionCounted })),
        discover: u.discoverWindows,
        learned: s.windows.learned(u, LEARNED_MAX),
      },
    })),
    totals: await totals(s),
    recent: { capacity: s.recent.capacity, decisions: s.recent.decisions, entries: access.shown ? entries : entries.map(withoutContent) },
  };
}

/** An entry as anyone may read it: no content, and no request id (a client may have chosen it: a header value). */
function withoutContent(entry: StatusEntry): StatusEntry {
  const { content: _content, requestId: _requestId, ...rest } = entry;
  return rest;
}

/** The tallies, with the requests each upstream answered in each API (the request counter's rescued routes). */
async function totals(s: StatusSources): Promise<Array<Tally & { requests: number }>> {
  const requests = await requestsByUpstreamAndApi(s.metrics);
  const rows = new Map<string, Tally & { requests: number }>();
  for (const tally of s.recent.totals()) rows.set(`${tally.upstream}\0${tally.api}`, { ...tally, requests: 0 });
  for (const [key, count] of requests) {
    const [upstream, api] = key.split('\0') as [string, Api];
    const row = rows.get(key) ?? {
      upstream,
      api,
      refused: 0,
      truncated: 0,
      rescued: 0,
      ahead: 0,
      failed: {},
      summarizerCalls: 0,
      summarizerTokens: { input: 0, output: 0 },
      tokensRemoved: 0,
      requests: 0,
    };
    row.requests = count;
    rows.set(key, row);
  }
  const order = new Map(s.upstreams.all.map((u, i) => [u.name, i]));
  return [...rows.values()].sort((a, b) => (order.get(a.upstream) ?? 0) - (order.get(b.upstream) ?? 0) || a.api.localeCompare(b.api));
}

async function requestsByUpstreamAndApi(metrics: Metrics): Promise<Map<string, number>> {
  const counter = metrics.registry.getSingleMetric('gateway_http_requests_total');
  const out = new Map<string, number>();
  if (!counter) return out;
  for (const { labels, value } of (await counter.get()).values) {
    const route = String(labels.route ?? '');
    const api = route.startsWith('/') ? apiOfPath(route) : undefined;
    if (!api || labels.upstream === undefined || value === 0) continue;
    const key = `${labels.upstream}\0${api}`;
    out.set(key, (out.get(key) ?? 0) + value);
  }
  return out;
}
