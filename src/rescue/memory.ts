import type { BoundFigures, CompactionResult, NewSpan } from '../compaction/index.js';
import type { SizeTarget } from '../compaction/size-target.js';
import type { Conversation } from '../dialects/types.js';
import type { Lease, MemoryEntry, Remembered } from '../memory/index.js';
import { lessonOf } from '../memory/limits.js';
import type { Verdict } from '../overlong/types.js';
import type { RescueContext } from './context.js';
import { identityOf } from './identity.js';

/*
 * The rescue's use of the compaction memory: what a rejection teaches, which remembered summary a
 * request extends, and remembering a new one (a request compacted before its first attempt, when
 * it extends one, is proactive.ts). All of it per tenant: a request that carries no credential
 * has no memory at all, unless memory.shareAnonymous lets every such request share one (a
 * single-user sidecar). Every store failure counts as a miss: the gateway keeps working without
 * memory.
 */

/**
 * A rejection teaches a bound, per tenant, upstream and model (memory/limits.ts): a stated limit
 * that fits the refused request, else the refused size. `verdict` is the one judged beside the
 * request (InspectedAnswer.judge): text the client wrote teaches nothing.
 */
export async function learnFrom(ctx: RescueContext, verdict: Verdict, rejectedBytes: number): Promise<void> {
  const memory = ctx.deps.memory;
  const who = memory && verdict.overlong ? identityOf(ctx).who() : null;
  if (!memory || !who?.model || !verdict.overlong) return;
  // Per model only what does not depend on the content: a stated window, a body limit, a refused
  // size. How many bytes a token takes is the conversation's (kept with its compaction).
  const lesson = lessonOf(verdict.reason, verdict.limits, rejectedBytes);
  if (Object.keys(lesson).length > 0) await memory.learn(who, lesson);
}

/** What memory remembers for the request, in one read: learned bounds and, given its conversation, the compaction it extends. */
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
 * The upstream accepted a request of `bytes` (what was sent: the client's, or a compaction ahead):
 * a limit learned for its tenant and model that says it could not fit is dropped
 * (memory/limits.ts). Only for a request large enough to disprove one (memory/index.ts mayLoosen,
 * then the tenant's reach); the model as the access log read it off the body's first bytes (never
 * parsed for it). Resolves once the request's size is read (the body is let go after); the store's
 * read and write are not waited for.
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
 * Runs `work` (recall, compact, remember) holding the conversation's lease, so one request at a
 * time, on any replica, compacts a conversation: the others wait for it (up to
 * summarizer.timeoutMs, what its summary may take), then recall what it remembered and reuse it.
 * Past that wait, or with the store failing, `work` gets no lease: it compacts on its own and
 * remembers nothing. The lease is freed when `work` is done, before anything goes upstream.
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

/**
 * Remembers the span a summary stands for, so later turns of the conversation reuse it: under
 * `lease` when the caller holds one; `'take'` takes it now if it is free (never waiting); null
 * remembers nothing.
 */
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
    // The span starts where this compaction's kept prefix ended (the thread's, for the same conversation).
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

/** A compacted request as it goes upstream, and its retry with all bound state stripped. */
export interface Rewrite {
  body: Buffer;
  headers: Record<string, string>;
  /** The retry's request (remembered so for the conversation), or null when stripping changes nothing. */
  restrip: () => Promise<{ body: Buffer; headers: Record<string, string>; bound: BoundFigures } | null>;
}

/** `remembered`: whether the compaction was remembered (it held the lease), so its stripped retry is remembered in its place. */
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
