import type { Dispatcher } from 'undici';
import { compact, type Summarizer } from '../../src/compaction/index.js';
import type { SizeTarget } from '../../src/compaction/size-target.js';
import { validateConfig } from '../../src/config/load.js';
import { DEFAULTS, type Config } from '../../src/config/schema.js';
import { DIALECTS } from '../../src/dialects/index.js';
import type { Api, Dialect } from '../../src/dialects/types.js';
import { sendingTo } from '../../src/rescue/summarizer-client.js';
import { meter, tokensOf, type Tokens } from './meter.js';
import { condensedItems, probesOf, scoreProbes, writtenBytes, type Score } from './probes.js';
import type { EvalCase } from './sessions.js';

/*
 * Each case compacted once per mode, in-process, by compact() itself: a size target that is a
 * share of the body forces the middle out, and what the compacted request still says of the items
 * it replaced is scored. One case at a time: the summarizer figures of a compaction are its own.
 */

export const MODES = ['mask', 'summarize', 'fallback'] as const;
export type Mode = (typeof MODES)[number];

/** The summarizer, as the config's `summarizer` section names it: the stand-in's URL, or a real one. */
export interface SummarizerChoice {
  url: string;
  model?: string;
  /** Its API; by default the API of the request being compacted. */
  api?: Api;
  apiKey?: string;
}

export interface EvalOptions {
  summarizer: SummarizerChoice;
  dispatcher: Dispatcher;
  modes?: readonly Mode[];
  /** The compacted body must be under this share of the original... */
  fitShare?: number;
  /** ...and a new compaction aims at this one. */
  aimShare?: number;
  onResult?: (result: CaseResult) => void;
}

export interface CaseResult {
  session: string;
  api: Api;
  at: number;
  mode: Mode;
  /** `compacted`, or why compact() did not shrink the request. */
  outcome: string;
  /** The strategy compact() reports (the mask rung's own, once it has one). */
  strategy?: string;
  bytesBefore: number;
  bytesAfter?: number;
  condensedItems: number;
  score: Score;
  /** Bytes of text the compaction wrote (summary, placeholders). */
  writtenBytes: number;
  summarizerCalls: number;
  tokens: Tokens;
}

export interface Evaluation {
  results: CaseResult[];
  fitShare: number;
  aimShare: number;
}

const FIT_SHARE = 0.6;
const AIM_SHARE = 0.4;
const BYTES_PER_TOKEN = 4;
const BECAUSE = 'the evaluation forced a compaction';

export async function evaluate(cases: readonly EvalCase[], options: EvalOptions): Promise<Evaluation> {
  const modes = options.modes ?? MODES;
  const fitShare = options.fitShare ?? FIT_SHARE;
  const aimShare = options.aimShare ?? AIM_SHARE;
  const configs = new Map(modes.map((mode) => [mode, configFor(mode, options.summarizer)]));
  const watched = meter(options.dispatcher);
  const results: CaseResult[] = [];
  for (const c of cases) {
    for (const mode of modes) {
      const result = await evaluateOne(c, mode, configs.get(mode)!, watched, { fitShare, aimShare });
      results.push(result);
      options.onResult?.(result);
    }
  }
  return { results, fitShare, aimShare };
}

async function evaluateOne(
  c: EvalCase,
  mode: Mode,
  config: Readonly<Config>,
  watched: ReturnType<typeof meter>,
  shares: { fitShare: number; aimShare: number },
): Promise<CaseResult> {
  const dialect = DIALECTS[c.api];
  const bytesBefore = Buffer.byteLength(JSON.stringify(c.request));
  const summarizer = summarizerTarget(config, dialect, c.request, watched.dispatcher);
  // What a case that did not compact shows: nothing condensed, nothing to keep.
  const base = {
    session: c.session,
    api: c.api,
    at: c.at,
    mode,
    bytesBefore,
    condensedItems: 0,
    writtenBytes: 0,
    score: scoreProbes(probesOf(dialect, []), {}),
  };
  const conversation = dialect.read(c.request);
  if (!conversation) return { ...base, outcome: 'no_messages', summarizerCalls: 0, tokens: { input: 0, output: 0, reported: true } };
  watched.take();
  const result = await compact(
    { dialect, request: c.request, conversation, bodyBytes: bytesBefore },
    {
      target: shareOf(bytesBefore, shares),
      because: BECAUSE,
      compaction: config.compaction,
      summary: config.summarizer,
      deadline: AbortSignal.timeout(config.summarizer.timeoutMs),
    },
    summarizer,
  );
  const tokens = tokensOf(watched.take(), summarizer.wire);
  if (result.outcome !== 'compacted') {
    return { ...base, outcome: result.why, summarizerCalls: result.summarizerCalls, tokens };
  }
  const compacted = JSON.parse(result.body.toString('utf8')) as Record<string, unknown>;
  return {
    ...base,
    ...scoreCompaction(dialect, c.request, compacted),
    outcome: 'compacted',
    strategy: result.strategy,
    bytesAfter: result.bytesAfter,
    summarizerCalls: result.summarizerCalls,
    tokens,
  };
}

/** What the compacted request still says of the items it replaced. */
export function scoreCompaction(
  dialect: Dialect,
  original: Record<string, unknown>,
  compacted: Record<string, unknown>,
): Pick<CaseResult, 'condensedItems' | 'score' | 'writtenBytes'> {
  const condensed = condensedItems(dialect, dialect.read(original)?.items ?? [], compacted);
  return {
    condensedItems: condensed.length,
    score: scoreProbes(probesOf(dialect, condensed), compacted),
    writtenBytes: writtenBytes(original, compacted),
  };
}

function shareOf(bytes: number, { fitShare, aimShare }: { fitShare: number; aimShare: number }): SizeTarget {
  return {
    fitBytes: Math.round(bytes * fitShare),
    aimBytes: Math.round(bytes * aimShare),
    bytesPerToken: BYTES_PER_TOKEN,
    tokensBefore: Math.round(bytes / BYTES_PER_TOKEN),
    source: 'stated',
  };
}

function configFor(mode: Mode, summarizer: SummarizerChoice): Readonly<Config> {
  return validateConfig({
    compaction: { strategy: mode === 'fallback' ? 'fallback' : 'summarize', mask: mode === 'mask' },
    summarizer: { url: summarizer.url, model: summarizer.model, api: summarizer.api, apiKey: summarizer.apiKey },
  });
}

/**
 * The summarizer as the rescue makes it from the config (src/rescue/summarizer-client.ts, summarizerFor,
 * which needs a request in flight): the configured API or the request's, the configured key in
 * that API's header, else none (a request here carries no credentials of its own); its calls
 * through the rescue's own sending, on `dispatcher`.
 */
function summarizerTarget(
  config: Readonly<Config>,
  dialect: Dialect,
  request: Record<string, unknown>,
  dispatcher: Dispatcher,
): Summarizer {
  const s = config.summarizer;
  const wire = DIALECTS[s.api ?? dialect.api].summarizer;
  const model = s.model ?? (typeof request.model === 'string' ? request.model : 'stand-in');
  const key: Record<string, string> = !s.apiKey
    ? {}
    : wire.credential === 'bearer'
      ? { authorization: `Bearer ${s.apiKey}` }
      : { [wire.credential]: s.apiKey };
  const url = s.url ?? config.upstream.url ?? DEFAULTS.upstreamUrl;
  const headers = { ...wire.headers({}), ...key };
  return {
    wire,
    model,
    send: sendingTo({
      dispatcher,
      url,
      model,
      wire,
      headers,
      windowLimit: config.upstream.errorBodyLimitBytes,
      gone: new AbortController().signal,
    }),
  };
}
