import { compact, keptPrefixEnd, type BoundFigures, type CompactionResult, type NewSpan, type SummarizerTarget } from '../compaction/index.js';
import { DEFAULT_BYTES_PER_TOKEN, learnedTarget, type Bounds, type SizeTarget } from '../compaction/target.js';
import type { Conversation } from '../dialects/types.js';
import { tenantOf } from '../memory/fingerprint.js';
import type { CompactionMemory, Recalled } from '../memory/index.js';
import type { Verdict } from '../overlong/types.js';
import { modelOf, type RescueContext } from './context.js';
import { countCompaction, type RescueRecord } from './report.js';

/*
 * The rescue's use of the compaction memory: what a rejection teaches, which remembered summary a
 * request extends, and sending a request compacted before its first attempt when it extends one
 * (it would surely be refused again). Every store failure counts as a miss: the gateway keeps
 * working without memory.
 */

/** A rejection teaches a bound, per upstream and model: a stated limit, or a refused size. */
export async function learnFrom(ctx: RescueContext, verdict: Extract<Verdict, { overlong: true }>, rejectedBytes: number): Promise<void> {
  const model = modelOf(ctx);
  if (!ctx.deps.memory || !model) return;
  const { reason, limits } = verdict;
  const learned: Bounds = {};
  // Per model only what does not depend on the content: a stated window, a body limit, a refused
  // size. How many bytes a token takes is the conversation's (kept with its compaction).
  if (reason === 'context_length' && limits.limitTokens) {
    learned.limitTokens = limits.limitTokens;
    learned.completionCounted = (limits as { completionCounted?: boolean }).completionCounted === true || limits.completionTokens !== undefined;
  }
  if (reason === 'body_too_large' && limits.limitBytes) learned.limitBytes = limits.limitBytes;
  // No number stated: the refused size is the bound.
  if (!learned.limitTokens && !learned.limitBytes && rejectedBytes > 0) learned.refusedBytes = rejectedBytes;
  if (Object.keys(learned).length > 0) await ctx.deps.memory.learn(model, learned);
}

export async function learnedBounds(ctx: RescueContext): Promise<Bounds | undefined> {
  const model = modelOf(ctx);
  return ctx.deps.memory && model ? ctx.deps.memory.limitFor(model) : undefined;
}

/** The remembered compaction this conversation extends, counted as a hit or a miss. */
export async function recallFor(ctx: RescueContext, conversation: Conversation): Promise<Recalled | null> {
  const memory = ctx.deps.memory;
  if (!memory) return null;
  const recalled = await memory.recall(tenantOf(ctx.clientHeaders), ctx.dialect.api, conversation.items, keptPrefixEnd(conversation));
  memory.countLookup(recalled);
  return recalled;
}

/** Remembers the span a summary stands for, so later turns of the conversation reuse it. */
export async function rememberSpan(ctx: RescueContext, conversation: Conversation, span: NewSpan, recalled: Recalled | null, target: SizeTarget): Promise<void> {
  const memory = ctx.deps.memory;
  if (!memory) return;
  const tenant = tenantOf(ctx.clientHeaders);
  const session = recalled?.session ?? memory.session(tenant, ctx.dialect.api, conversation.items, span.fixedEnd);
  await memory.remember(session, tenant, conversation.items, span.fixedEnd, {
    spanLength: span.spanLength,
    pinnedOffsets: span.pinnedOffsets,
    ...(span.summary.length === 1 ? { summary: span.summary[0] } : { summary: null, summaryItems: span.summary }),
    summaryText: span.summaryText,
    ...(span.trail ? { trail: span.trail } : {}),
    summarizedCount: span.summarizedCount,
    strategy: span.strategy,
    summarizerCalls: span.summarizerCalls,
    bound: span.bound,
    fitBytes: target.fitBytes,
    aimBytes: target.aimBytes,
    bytesPerToken: target.bytesPerToken,
    createdAt: Date.now(),
  });
}

/** A compacted request as it goes upstream, and its retry with all bound state stripped. */
export interface Rewrite {
  body: Buffer;
  headers: Record<string, string>;
  /** The retry's request (remembered so for the conversation), or null when stripping changes nothing. */
  restrip: () => Promise<{ body: Buffer; headers: Record<string, string>; bound: BoundFigures } | null>;
}

export function rewriteOf(
  ctx: RescueContext,
  conversation: Conversation,
  compaction: Extract<CompactionResult, { outcome: 'compacted' }>,
  recalled: Recalled | null,
  target: SizeTarget,
): Rewrite {
  return {
    body: compaction.body,
    headers: compaction.headers,
    restrip: async () => {
      const again = compaction.restrip();
      if (again?.span) await rememberSpan(ctx, conversation, again.span, recalled, target);
      return again;
    },
  };
}

export interface Proactive {
  rewrite: Rewrite;
  record: RescueRecord;
}

/**
 * The memory to look in before the first attempt, or null while it remembers nothing at all: then
 * not even the request's credential is hashed (3 to 5 µs a request), and the first attempt
 * waits on no promise.
 */
export function memoryAhead(ctx: RescueContext): CompactionMemory | null {
  const memory = ctx.deps.memory;
  return memory?.mayKnowTenants() ? memory : null;
}

/**
 * A request that extends a remembered compaction is sent compacted before its first attempt: the
 * remembered summary as it is while the result fits what is known to fit, else extended. Learned
 * limits set the target; they never trigger a compaction on their own. Returns null when the
 * request should go as the client sent it.
 */
export async function compactAhead(ctx: RescueContext, memory: CompactionMemory, summarizer: (target: SizeTarget) => SummarizerTarget): Promise<Proactive | null> {
  // Only a tenant with something remembered has its body parsed before the first attempt.
  if (!(await memory.knowsTenant(tenantOf(ctx.clientHeaders)))) return null;
  const json = ctx.incoming.json;
  const conversation = json ? ctx.dialect.read(json) : null;
  if (!json || !conversation) return null;
  const recalled = await memory.recall(tenantOf(ctx.clientHeaders), ctx.dialect.api, conversation.items, keptPrefixEnd(conversation));
  if (!recalled) return null;
  memory.countLookup(recalled);

  const started = performance.now();
  const bytes = ctx.incoming.bytes;
  const target = aheadTarget(recalled, bytes, await learnedBounds(ctx), ctx);
  const compaction = await compact({
    dialect: ctx.dialect,
    request: json,
    conversation,
    headers: ctx.headers,
    bodyBytes: bytes,
    target,
    config: ctx.deps.config,
    dispatcher: ctx.deps.dispatcher,
    summarizer: summarizer(target),
    signal: ctx.gone.signal,
    because: "the conversation had outgrown the upstream's limit before",
    recalled: recalled.entry,
  });
  const durationMs = performance.now() - started;
  countCompaction(ctx.deps.metrics, ctx.dialect.api, compaction, durationMs);
  if (compaction.outcome !== 'compacted') return null;
  if (compaction.newSpan) await rememberSpan(ctx, conversation, compaction.newSpan, recalled, target);
  memory.countProactive();
  const record: RescueRecord = { api: ctx.dialect.api, outcome: 'compacted', trigger: 'proactive', compaction, bound: compaction.bound, limit: 'learned', durationMs };
  return { rewrite: rewriteOf(ctx, conversation, compaction, recalled, target), record };
}

/** What the remembered compaction knew to fit, tightened by anything learned since. */
function aheadTarget(recalled: Recalled, bytes: number, learned: Bounds | undefined, ctx: RescueContext): SizeTarget {
  const remembered = { fitBytes: recalled.entry.fitBytes, aimBytes: recalled.entry.aimBytes };
  const ratio = ctx.deps.config.compaction.targetRatio;
  const bytesPerToken = recalled.entry.bytesPerToken ?? DEFAULT_BYTES_PER_TOKEN;
  const fromLearned = learned ? learnedTarget(bytes, learned, ratio, ctx.dialect.completion(ctx.incoming.json ?? {}), bytesPerToken) : null;
  const fitBytes = Math.min(remembered.fitBytes, fromLearned?.fitBytes ?? Infinity);
  return {
    fitBytes,
    aimBytes: Math.min(remembered.aimBytes, fromLearned?.aimBytes ?? Infinity, fitBytes),
    bytesPerToken,
    tokensBefore: Math.round(bytes / bytesPerToken),
    source: 'learned',
    bounds: learned,
    exact: fromLearned?.exact ?? false,
  };
}
