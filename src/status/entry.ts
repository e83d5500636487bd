import type { NewSpan } from '../compaction/index.js';
import type { Trail } from '../compaction/trail.js';
import type { Api } from '../dialects/types.js';
import type { Decided, StreamedCut } from '../rescue/context.js';
import type { RescueRecord } from '../rescue/report.js';

/*
 * One decision as the status page keeps it: the record's figures copied, never the record (it
 * holds the request's bodies), and the conversation's content cut to a fixed size, kept at all
 * only where it may be shown (status/recent.ts).
 */

/** What became of a run of the conversation's items, by position (0-based, `to` exclusive). */
export interface ItemRun {
  from: number;
  to: number;
  /** kept as sent; condensed into the summary; tool outputs in it masked; kept after the summary (the last input). */
  fate: 'kept' | 'condensed' | 'masked' | 'pinned';
}

/** What the gateway wrote into the conversation: the person's own words retold. */
interface EntryContent {
  /** The summary text, its first SUMMARY_CHARS. */
  summary: string;
  /** Its whole length. */
  summaryChars: number;
  trail?: Trail;
}

interface Sizes {
  items?: number;
  bytes?: number;
  tokens?: number;
}

export interface StatusEntry {
  id: number;
  /** When the decision was made (ISO 8601). */
  at: string;
  requestId?: string;
  upstream: string;
  api: Api;
  model?: string;
  trigger: RescueRecord['trigger'];
  /** `relayed`: a stream the upstream cut, already on its way to the client. */
  outcome: RescueRecord['outcome'] | 'relayed';
  reason?: string;
  rejectedStatus?: number;
  remedy?: string;
  strategy?: string;
  /** Why nothing useful could be compacted (not_shrunk). */
  why?: string;
  /** Where the window came from: stated, learned, declared, discovered, observed. */
  limit?: string;
  windowTokens?: number;
  before?: Sizes;
  after?: Sizes;
  completion?: { before: number; after: number };
  memory?: 'hit' | 'miss';
  /** Kept contents shortened to fit. */
  cut?: number;
  /** Tool outputs masked. */
  masked?: number;
  summarizer?: { calls: number; ms?: number; failure?: string; providerFailure?: string; inputTokens?: number; outputTokens?: number };
  replayStatus?: number;
  durationMs?: number;
  /** The conversation's items, in order, by what became of them. */
  items?: ItemRun[];
  content?: EntryContent;
}

/** The most of a summary an entry keeps (UTF-16 code units). */
export const SUMMARY_CHARS = 8 * 1024;
/** Of each list of the trail, the newest this many facts, each at most FACT_CHARS. */
export const TRAIL_FACTS = 20;
export const FACT_CHARS = 200;
/** Runs of items an entry keeps (the pinned inputs make a few). */
const MAX_RUNS = 40;

/** The entry for a final decision; `content` only where it may be shown. */
export function entryOf(record: RescueRecord, request: Decided, id: number, now: Date, content: boolean): StatusEntry {
  const c = record.compaction;
  const done = c?.outcome === 'compacted' ? c : undefined;
  const span = done?.span;
  const strategy = record.remedy === 'clamp' || record.remedy === 'truncation' ? record.remedy : done?.strategy;
  const entry: StatusEntry = {
    id,
    at: now.toISOString(),
    requestId: request.requestId,
    upstream: record.upstream ?? 'default',
    api: record.api,
    model: request.model,
    trigger: record.trigger,
    outcome: record.outcome,
    reason: record.reason,
    rejectedStatus: record.rejectedStatus,
    remedy: record.remedy,
    strategy,
    why: c?.outcome === 'not_shrunk' ? c.why : undefined,
    limit: record.limit,
    windowTokens: record.window?.tokens ?? record.statedTokens,
    before: c
      ? { items: c.messagesBefore || undefined, bytes: c.bytesBefore, tokens: c.tokensBefore || record.window?.estimate }
      : record.window
        ? { tokens: record.window.estimate }
        : undefined,
    after: done ? { items: done.messagesAfter, bytes: done.bytesAfter, tokens: done.tokensAfter } : undefined,
    completion: record.completion && { ...record.completion },
    memory: done?.memory,
    cut: done?.cut,
    masked: span?.strategy === 'mask' ? span.summarizedCount : undefined,
    summarizer: done && (done.summarizerCalls > 0 || done.summarizerFailure) ? summarizerOf(done) : undefined,
    replayStatus: record.replayStatus,
    durationMs: record.durationMs === undefined ? undefined : Math.round(record.durationMs),
    items: span && done ? runsOf(span, done.messagesBefore) : undefined,
  };
  if (content && span && span.strategy !== 'mask') entry.content = contentOf(span);
  return withoutUndefined(entry);
}

/** The entry for a stream the upstream cut: what was sent, what it counted, relayed as it was. */
export function cutEntry(cut: StreamedCut, request: Decided, id: number, now: Date): StatusEntry {
  return withoutUndefined({
    id,
    at: now.toISOString(),
    requestId: request.requestId,
    upstream: cut.upstream,
    api: cut.api,
    model: request.model,
    trigger: 'truncated',
    outcome: 'relayed',
    limit: 'observed',
    windowTokens: cut.reportedTokens,
    before: { bytes: cut.bytes, tokens: cut.expectedTokens },
    after: { tokens: cut.reportedTokens },
  });
}

function summarizerOf(done: Extract<NonNullable<RescueRecord['compaction']>, { outcome: 'compacted' }>): StatusEntry['summarizer'] {
  const tokens = done.summarizerTokens;
  const ms = done.summarizerMs === undefined ? undefined : Math.round(done.summarizerMs);
  return withoutUndefined({
    calls: done.summarizerCalls,
    ms,
    failure: done.summarizerFailure,
    providerFailure: done.providerFailure,
    inputTokens: tokens?.input,
    outputTokens: tokens?.output,
  });
}

/** The items before the compaction, by fate: the kept prefix, the span (pins kept in it), the kept tail. */
export function runsOf(span: Pick<NewSpan, 'fixedEnd' | 'spanLength' | 'pinnedOffsets' | 'strategy'>, itemsBefore: number): ItemRun[] {
  const spanEnd = Math.min(itemsBefore, span.fixedEnd + span.spanLength);
  const pinned = new Set(span.pinnedOffsets.map((o) => span.fixedEnd + o));
  const condensed = span.strategy === 'mask' ? 'masked' : 'condensed';
  const runs: ItemRun[] = [];
  const add = (from: number, to: number, fate: ItemRun['fate']) => {
    if (to <= from) return;
    const last = runs.at(-1);
    if (last && last.fate === fate && last.to === from) last.to = to;
    else runs.push({ from, to, fate });
  };
  add(0, Math.min(span.fixedEnd, itemsBefore), 'kept');
  let at = span.fixedEnd;
  for (const p of [...pinned].filter((i) => i >= span.fixedEnd && i < spanEnd).sort((a, b) => a - b)) {
    add(at, p, condensed);
    add(p, p + 1, 'pinned');
    at = p + 1;
  }
  add(at, spanEnd, condensed);
  add(spanEnd, itemsBefore, 'kept');
  return runs.slice(0, MAX_RUNS);
}

function contentOf(span: NewSpan): EntryContent {
  const text = span.summaryText;
  const content: EntryContent = { summary: copyOf(cutAt(text, SUMMARY_CHARS)), summaryChars: text.length };
  if (span.trail) content.trail = trailOf(span.trail);
  return content;
}

function trailOf(trail: Trail): Trail {
  const newest = (facts: readonly string[]) => facts.slice(-TRAIL_FACTS).map((f) => copyOf(cutAt(f, FACT_CHARS)));
  return {
    changed: newest(trail.changed),
    read: newest(trail.read),
    commands: newest(trail.commands),
    errors: newest(trail.errors),
    said: newest(trail.said),
  };
}

/** The first `chars` code units of `text`, never half of a surrogate pair. */
function cutAt(text: string, chars: number): string {
  if (text.length <= chars) return text;
  const code = text.charCodeAt(chars - 1);
  return text.slice(0, code >= 0xd800 && code <= 0xdbff ? chars - 1 : chars);
}

/** A string of its own: a slice can hold on to the whole it was cut from (a tool output, a request). */
function copyOf(text: string): string {
  return Buffer.from(text, 'utf8').toString('utf8');
}

function withoutUndefined<T extends object>(value: T): T {
  for (const key of Object.keys(value) as Array<keyof T>) if (value[key] === undefined) delete value[key];
  return value;
}
