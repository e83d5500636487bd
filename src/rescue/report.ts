import type { FastifyBaseLogger } from 'fastify';
import type { BoundFigures, CompactionResult } from '../compaction/index.js';
import type { LimitSource } from '../compaction/size-target.js';
import type { Api } from '../dialects/types.js';
import type { Metrics, SummarizerLabels } from '../telemetry/metrics.js';
import type { OverlongReason } from '../overlong/types.js';
import type { InspectedAnswer } from './inspect.js';
import type { WindowSource } from '../upstream/windows.js';

export type Outcome = 'replayed' | 'replay_failed' | 'not_shrunk' | 'disabled' | 'compacted' | 'shed';
export type ReplayResult = 'success' | 'upstream_error' | 'still_overlong' | 'failed';
type Remedy = 'clamp' | 'truncation' | 'compaction';

export interface RescueRecord {
  api: Api;
  upstream?: string;
  outcome: Outcome;
  trigger: 'rejected' | 'proactive' | 'window' | 'truncated';
  reason?: OverlongReason;
  rejectedStatus?: number;
  /** This request's rejection's, or (learned) an earlier one's. */
  statedTokens?: number;
  remedy?: Remedy;
  compaction?: CompactionResult;
  completion?: { before: number; after: number };
  limit?: LimitSource | WindowSource;
  window?: { tokens: number; estimate: number; model?: string };
  durationMs?: number;
  replayStatus?: number;
  replayResult?: ReplayResult;
  replayError?: string;
  /** No one got an error: no failure of the rescue. */
  clientLeft?: boolean;
  bound?: BoundFigures | null;
  bindingRetry?: boolean;
  /** From the answer's input_transformations. */
  stateDropped?: number;
  overflowError?: 'translated';
  agentCompaction?: boolean;
  /** All estimated (rescueCost). */
  budget?: { inUse: number; limit: number; cost: number };
}

/** An RFC 8941 dictionary of tokens and integers. */
export function compactionHeader(r: RescueRecord): string {
  const c = r.compaction;
  const done = c?.outcome === 'compacted' ? c : undefined;
  const fields: Array<[string, string | number | undefined]> = [
    ['outcome', r.outcome],
    ['trigger', r.trigger],
    ['reason', r.reason],
    ['limit', r.limit],
    ['window', r.window?.tokens],
    ['memory', done?.memory],
    ['strategy', strategyOf(r)],
    ['why', c?.outcome === 'not_shrunk' ? c.why : undefined],
    ['messages-before', c?.messagesBefore],
    ['messages-after', done?.messagesAfter],
    ['bytes-before', c?.bytesBefore],
    ['bytes-after', done?.bytesAfter],
    ['tokens-before', c?.tokensBefore],
    ['tokens-after', done?.tokensAfter],
    ['completion-before', r.completion?.before],
    ['completion-after', r.completion?.after],
    ['cut', done ? done.cut : undefined],
    ['summarizer-ms', done?.summarizerMs],
    ['summarizer-failure', done?.summarizerFailure],
    ['provider-failure', done?.providerFailure],
    ['thinking-stripped', r.bound?.stripped],
    ['block-binding', r.bound ? (r.bound.optIn ? 'drop_block' : 'none') : undefined],
    ['binding-retry', r.bindingRetry ? 1 : undefined],
    ['reasoning-dropped', r.stateDropped],
    ['agent-compaction', r.agentCompaction ? 1 : undefined],
    ['overflow-error', r.overflowError],
    ['replay-status', r.replayStatus],
  ];
  return fields
    .filter(([, v]) => v !== undefined)
    .map(([k, v]) => `${k}=${typeof v === 'number' ? Math.round(v) : v}`)
    .join(', ');
}

function strategyOf(r: RescueRecord): string | undefined {
  if (r.remedy === 'clamp' || r.remedy === 'truncation') return r.remedy;
  return r.compaction?.outcome === 'compacted' ? r.compaction.strategy : undefined;
}

const FAILED: ReadonlySet<Outcome> = new Set(['replay_failed', 'not_shrunk', 'shed']);

export function isProactive(r: RescueRecord): boolean {
  return r.trigger === 'proactive' || r.trigger === 'window';
}

/**
 * ERROR when the client got the upstream's error although the gateway would have helped; a proactive
 * compaction accepted is INFO (every later turn of a healthy long session), else WARN.
 */
export function logDecision(log: FastifyBaseLogger, r: RescueRecord, answer?: Pick<InspectedAnswer, 'response' | 'verdict'>): void {
  const c = r.compaction;
  const fields = { compaction: flat(r) };
  const what = whatHappened(r);
  const failed = FAILED.has(r.outcome) && !isProactive(r) && !r.clientLeft;
  const words = r.overflowError ? `; the client gets it as its API's own overflow error, so its agent can compact` : '';
  const say = (message: string) => (failed ? log.error(fields, `${message}${words}`) : log.warn(fields, `${message}${words}`));
  if (r.outcome === 'disabled') {
    say(`${what}: compaction is off for this request; passing the upstream error through`);
  } else if (r.outcome === 'shed' && r.budget) {
    const b = r.budget;
    const why =
      b.cost > b.limit
        ? `reading it would take about ${size(b.cost)}, more than the whole rescue budget (${size(b.limit)}, compaction.rescueBudgetBytes)`
        : `rescues held about ${size(b.inUse)} already and it needed ${size(b.cost)} more (budget ${size(b.limit)}, compaction.rescueBudgetBytes)`;
    say(`${what}: shed, ${why}; passing the upstream error through`);
  } else if (r.remedy === 'clamp') {
    const then = r.trigger === 'window' ? 'sending it so' : replayEnd(r);
    say(`${what}: the prompt fits; lowered the completion limit from ${r.completion?.before} to ${r.completion?.after}, ${then}`);
  } else if (r.remedy === 'truncation') {
    say(`${what}: its history is held upstream (previous_response_id); truncation "auto", ${replayEnd(r)}`);
  } else if (c?.outcome === 'not_shrunk') {
    const then = isProactive(r) ? 'sending it as it was' : 'passing the upstream error through';
    say(`${what}: no useful compaction (${c.why}, ${c.messagesBefore} items, ${size(c.bytesBefore)}); ${then}`);
  } else if (c?.outcome === 'compacted') {
    const took = c.summarizerMs !== undefined ? `, ${seconds(c.summarizerMs)}` : '';
    const fellBack = c.summarizerFailure ? ` after the summarizer failed (${c.summarizerFailure})` : '';
    const remembered = c.strategy === 'mask' ? 'remembered masking' : 'remembered summary';
    const memory = c.memory === 'hit' ? (c.summarizerCalls === 0 ? `, ${remembered} reused as it was` : `, ${remembered} extended`) : '';
    const cut = c.cut > 0 ? `, ${c.cut} kept contents cut to fit` : '';
    const proactive = isProactive(r);
    const then = proactive ? 'sending it compacted' : replayEnd(r);
    const accepted = proactive && !r.bindingRetry && answer !== undefined && !answer.verdict.overlong && answer.response.status < 400;
    const message = `${what}: compacted ${c.messagesBefore} items into ${c.messagesAfter} (${size(c.bytesBefore)} -> ${size(c.bytesAfter)}, ${c.strategy}${took}${memory}${cut})${fellBack}, ${then}${boundSaid(r)}`;
    if (accepted) log.info(fields, message);
    else say(`${message}${proactive ? refusedProactive(answer) : ''}`);
    logSummaryText(log, r, c);
  }
}

function replayEnd(r: RescueRecord): string {
  if (r.clientLeft) return `replayed once; the client left before the upstream answered (${r.replayError ?? 'aborted'})`;
  if (r.replayStatus === undefined)
    return `replayed once, which failed before the upstream answered (${r.replayError ?? 'no answer'}); the client gets an error`;
  if (r.outcome === 'replayed') return `replayed once: the upstream answered ${r.replayStatus}`;
  const still = r.replayResult === 'still_overlong' ? ', overlong still' : '';
  return `replayed once: the upstream answered ${r.replayStatus}${still}, passed to the client`;
}

function whatHappened(r: RescueRecord): string {
  const w = r.window;
  const of = w?.model ? ` of ${w.model}` : '';
  switch (r.trigger) {
    case 'proactive':
      return `${r.api} request extends a conversation compacted before (remembered ${r.compaction?.outcome === 'compacted' && r.compaction.strategy === 'mask' ? 'masking' : 'summary'})`;
    case 'window':
      return `${r.api} request of about ${w?.estimate} tokens would pass the ${r.limit} context window${of} (${w?.tokens} tokens)`;
    case 'truncated':
      return `upstream silently cut the ${r.api} request${of} (${r.rejectedStatus}: it counted ${w?.tokens} prompt tokens of about ${w?.estimate} sent)`;
    default:
      return `upstream rejected the ${r.api} request as overlong (${r.rejectedStatus} ${r.reason}, limit ${r.limit ?? 'unknown'})`;
  }
}

function refusedProactive(answer: Pick<InspectedAnswer, 'response' | 'verdict'> | undefined): string {
  if (!answer) return '';
  const status = answer.response.status;
  if (answer.verdict.overlong) return `; the upstream refused it as overlong all the same (${status})`;
  return status >= 400 ? `; the upstream answered ${status}, passed through` : '';
}

/** UTF-16 code units. */
const SUMMARY_LOG_CHARS = 16 * 1024;

const DEBUG_LEVELS = new Set(['debug', 'trace']);

/**
 * The summary is the conversation's own content retold, so the line says so (`content: "user"`): logs
 * that must not hold prompts keep debug off. A summary reused unchanged was logged when it was made.
 */
function logSummaryText(log: FastifyBaseLogger, r: RescueRecord, c: Extract<CompactionResult, { outcome: 'compacted' }>): void {
  if (!DEBUG_LEVELS.has(log.level)) return;
  const span = c.newSpan;
  const text = span?.summaryText ?? '';
  const summary = text.length > SUMMARY_LOG_CHARS ? cutAt(text, SUMMARY_LOG_CHARS) : text;
  const fields = {
    content: 'user',
    api: r.api,
    upstream: r.upstream,
    trigger: r.trigger,
    strategy: c.strategy,
    memory: c.memory,
    summarizedItems: span?.summarizedCount,
    summary,
    summaryChars: text.length,
    ...(summary.length < text.length ? { summaryTruncated: true } : {}),
  };
  const standsFor = span ? `${span.summarizedCount} earlier items` : 'the earlier items';
  const what = !span
    ? 'the remembered summary, sent unchanged (its text was logged at debug when it was made)'
    : c.strategy === 'mask'
      ? 'old tool outputs masked, no summary text'
      : c.strategy === 'provider'
        ? "the provider's own compaction window, opaque, no summary text"
        : `the summary (${text.length} chars${summary.length < text.length ? `, the first ${summary.length} here` : ''})`;
  log.debug(fields, `what the model got instead of ${standsFor}: ${what}; user content, logged at debug only`);
}

/** Never half of a surrogate pair. */
function cutAt(text: string, chars: number): string {
  const code = text.charCodeAt(chars - 1);
  return text.slice(0, code >= 0xd800 && code <= 0xdbff ? chars - 1 : chars);
}

function boundSaid(r: RescueRecord): string {
  const said = [
    r.bound?.stripped ? `${r.bound.stripped} stale thinking block${r.bound.stripped === 1 ? '' : 's'} stripped` : '',
    r.bound?.optIn ? "the open round's kept under drop_block" : '',
    r.bindingRetry ? 'sent again with all thinking stripped after a binding refusal' : '',
    r.stateDropped ? `the upstream dropped ${r.stateDropped} bound item${r.stateDropped === 1 ? '' : 's'}` : '',
  ].filter(Boolean);
  return said.length > 0 ? `; ${said.join(', ')}` : '';
}

const NOT_LOGGED = new Set(['body', 'newSpan', 'span', 'headers', 'restrip', 'bound']);

function flat(r: RescueRecord): Record<string, unknown> {
  const c = r.compaction;
  const { compaction: _c, statedTokens: _stated, completion, durationMs, bound, budget, window, ...rest } = r;
  const figures = c
    ? Object.fromEntries(
        Object.entries(c)
          .filter(([k, v]) => !NOT_LOGGED.has(k) && v !== undefined)
          .map(([k, v]) => [k === 'outcome' ? 'compaction' : k, typeof v === 'number' ? Math.round(v) : v]),
      )
    : {};
  return {
    ...rest,
    ...figures,
    strategy: strategyOf(r),
    thinkingStripped: bound?.stripped,
    blockBinding: bound ? (bound.optIn ? 'drop_block' : 'none') : undefined,
    completionBefore: completion?.before,
    completionAfter: completion?.after,
    model: window?.model,
    windowTokens: window?.tokens,
    estimatedTokens: window?.estimate,
    budgetInUseBytes: budget?.inUse,
    budgetBytes: budget?.limit,
    costBytes: budget?.cost,
    durationMs: durationMs === undefined ? undefined : Math.round(durationMs),
  };
}

export function countRescue(metrics: Metrics, r: RescueRecord, replay?: ReplayResult): void {
  const upstream = r.upstream ?? 'default';
  metrics.compactions.inc({ api: r.api, strategy: strategyOf(r) ?? 'none', outcome: r.outcome, upstream });
  // A rescue whose client left ended for no one: neither saved nor failed.
  if (!isProactive(r) && !r.clientLeft) metrics.rescues.inc({ api: r.api, outcome: r.outcome, upstream });
  if (replay) metrics.replays.inc({ api: r.api, result: replay, upstream });
}

/** Before the replay's answer is known. */
export function countCompaction(metrics: Metrics, api: Api, c: CompactionResult, durationMs: number, summarizer: SummarizerLabels): void {
  metrics.compactionDuration.observe(durationMs / 1000);
  // A model never summarised with gets no series.
  const by = () => metrics.summarizerLabels(summarizer.upstream, summarizer.model);
  if (c.summarizerCalls > 0) metrics.summarizerCalls.inc(by(), c.summarizerCalls);
  if (c.outcome !== 'compacted') return;
  const tokens = c.summarizerTokens;
  if (tokens && tokens.input + tokens.output > 0) {
    const source = tokens.estimated ? 'estimated' : 'usage';
    metrics.summarizerTokens.inc({ ...by(), direction: 'input', source }, tokens.input);
    metrics.summarizerTokens.inc({ ...by(), direction: 'output', source }, tokens.output);
  }
  metrics.removedBytes.inc({ api }, Math.max(0, c.bytesBefore - c.bytesAfter));
  metrics.removedTokens.inc({ api }, Math.max(0, c.tokensBefore - c.tokensAfter));
  if (c.summarizerFailure) metrics.summarizerFailures.inc({ ...by(), kind: c.summarizerFailure });
  if (c.summarizerMs !== undefined) metrics.summarizerDuration.observe(by(), c.summarizerMs / 1000);
  metrics.compactionBytes.observe({ stage: 'before' }, c.bytesBefore);
  metrics.compactionBytes.observe({ stage: 'after' }, c.bytesAfter);
  metrics.compactionTokens.observe({ stage: 'before' }, c.tokensBefore);
  metrics.compactionTokens.observe({ stage: 'after' }, c.tokensAfter);
}

function size(bytes: number): string {
  if (bytes >= 1e6) return `${(bytes / 1e6).toFixed(2)} MB`;
  if (bytes >= 1e3) return `${Math.round(bytes / 1e3)} KB`;
  return `${bytes} B`;
}

export function seconds(ms: number): string {
  return ms >= 1000 ? `${(ms / 1000).toFixed(1)} s` : `${Math.round(ms)} ms`;
}
