import type { BoundFigures, CompactionResult, NewSpan } from '../compaction/index.js';
import type { SizeTarget } from '../compaction/size-target.js';
import type { Conversation } from '../dialects/types.js';
import type { Lease, MemoryEntry, Remembered } from '../memory/index.js';
import { lessonOf } from '../memory/limits.js';
import type { Verdict } from '../overlong/types.js';
import type { RescueContext } from './context.js';
import { identityOf } from './identity.js';

/*
 * All of it per tenant: a request with no credential has no memory, unless memory.shareAnonymous
 * lets every such request share one (a single-user sidecar).
 */

/** `verdict` is the one judged beside the request: text the client wrote teaches nothing. */
export async function learnFrom(ctx: RescueContext, verdict: Verdict, rejectedBytes: number): Promise<void> {
  const memory = ctx.deps.memory;
  const who = memory && verdict.overlong ? identityOf(ctx).who() : null;
  if (!memory || !who?.model || !verdict.overlong) return;
  // Bytes per token are the conversation's (kept with its compaction), never the model's.
  const lesson = lessonOf(verdict.reason, verdict.limits, rejectedBytes);
  if (Object.keys(lesson).length > 0) await memory.learn(who, lesson);
}

export async function rememberedFor(ctx: RescueContext, conversation: Conversation | null): Promise<Remembered> {
  const memory = ctx.deps.memory;
  const identity = identityOf(ctx);
  const of = memory && conversation ? identity.thread(memory, conversation) : identity.who();
  if (!memory || !of) return { entry: null, bounds: undefined };
  const remembered = await memory.remembered(of, ctx.incoming.bytes);
  if (conversation) memory.countLookup(remembered.entry);
  return remembered;
}

/**
 * The model as the access log read it off the body's first bytes (never parsed for it). Resolves once
 * the request's size is read; the store's read and write are not waited for.
 */
export async function noteAccepted(ctx: RescueContext, bytes: number): Promise<void> {
  const memory = ctx.deps.memory;
  if (!memory?.mayLoosen(bytes)) return;
  const identity = identityOf(ctx);
  const tenant = identity.tenant;
  if (!tenant || bytes < (await identity.reach(memory, tenant)).disproving) return;
  const who = identity.who(true);
  if (who?.model) await memory.accepted(who, bytes);
}

/**
 * Others wait up to summarizer.timeoutMs, then reuse what the holder remembered. The lease is freed
 * when `work` is done, before anything goes upstream.
 */
export async function underLease<T>(ctx: RescueContext, conversation: Conversation, work: (lease: Lease | null) => Promise<T>): Promise<T> {
  const memory = ctx.deps.memory;
  const thread = memory && identityOf(ctx).thread(memory, conversation);
  const lease = thread ? await memory.lease(thread, ctx.deps.config.summarizer.timeoutMs, ctx.gone.signal) : null;
  try {
    return await work(lease);
  } finally {
    await lease?.release();
  }
}

/** `'take'` takes the lease now if it is free (never waiting); null remembers nothing. */
export async function rememberSpan(
  ctx: RescueContext,
  conversation: Conversation,
  span: NewSpan,
  target: SizeTarget,
  lease: Lease | null | 'take',
): Promise<void> {
  const memory = ctx.deps.memory;
  const thread = lease && memory ? identityOf(ctx).thread(memory, conversation) : null;
  const held = thread && (lease === 'take' ? await memory!.lease(thread, 0) : lease);
  if (!thread || !held) return;
  try {
    await memory!.remember(held, { ...thread, fixedEnd: span.fixedEnd }, entryOf(span, target));
  } finally {
    if (lease === 'take') await held.release();
  }
}

function entryOf(span: NewSpan, target: SizeTarget): Omit<MemoryEntry, 'spanDigest'> {
  return {
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
  };
}

export interface Rewrite {
  body: Buffer;
  headers: Record<string, string>;
  restrip: () => Promise<{ body: Buffer; headers: Record<string, string>; bound: BoundFigures } | null>;
}

/** A remembered compaction's stripped retry is remembered in its place. */
export function rewriteOf(
  ctx: RescueContext,
  conversation: Conversation,
  compaction: Extract<CompactionResult, { outcome: 'compacted' }>,
  target: SizeTarget,
  remembered: boolean,
): Rewrite {
  return {
    body: compaction.body,
    headers: compaction.headers,
    restrip: async () => {
      const again = compaction.restrip();
      // After the replay: the lease is taken again, briefly, and only if no one holds it.
      if (again?.span) await rememberSpan(ctx, conversation, again.span, target, remembered ? 'take' : null);
      return again;
    },
  };
}
