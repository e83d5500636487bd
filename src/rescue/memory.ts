import { keptPrefixEnd, type BoundFigures, type CompactionResult, type NewSpan } from '../compaction/index.js';
import type { Bounds, SizeTarget } from '../compaction/size-target.js';
import type { Conversation } from '../dialects/types.js';
import { agentSessionOf, tenantOf } from '../memory/fingerprint.js';
import type { CompactionMemory, Lease, MemoryEntry, Recalled } from '../memory/index.js';
import { lessonOf } from '../memory/limits.js';
import type { Verdict } from '../overlong/types.js';
import { modelOf, type RescueContext } from './context.js';
import { queryOf } from '../lib/url.js';

/*
 * The rescue's use of the compaction memory: what a rejection teaches, which remembered summary a
 * request extends, and remembering a new one (a request compacted before its first attempt, when
 * it extends one, is ahead.ts). All of it per tenant: a request that carries no credential
 * has no memory at all, unless memory.shareAnonymous lets every such request share one (a
 * single-user sidecar). Every store failure counts as a miss: the gateway keeps working without
 * memory.
 */

/** The one tenant of every request without a credential, where memory.shareAnonymous allows it. */
const ANONYMOUS = 'anonymous';

/**
 * Whom the request's memory belongs to: its credentials, and a `key` in its query (as it goes
 * upstream; a Gemini key the gateway takes out of it is in clientHeaders as x-goog-api-key).
 * Null: it has none.
 */
export function tenantFor(ctx: Pick<RescueContext, 'clientHeaders' | 'path' | 'deps'>): string | null {
  const tenant = tenantOf(ctx.clientHeaders, queryOf(ctx.path).slice(1), ctx.deps.config.memory.tenantSecret);
  return tenant ?? (ctx.deps.config.memory.shareAnonymous ? ANONYMOUS : null);
}

/**
 * A rejection teaches a bound, per tenant, upstream and model (memory/limits.ts): a stated limit
 * that fits the refused request, else the refused size. `verdict` is the one judged beside the
 * request (InspectedAnswer.judge): text the client wrote teaches nothing.
 */
export async function learnFrom(ctx: RescueContext, verdict: Verdict, rejectedBytes: number): Promise<void> {
  const memory = ctx.deps.memory;
  const model = modelOf(ctx);
  if (!memory || !model || !verdict.overlong) return;
  const tenant = tenantFor(ctx);
  // Per model only what does not depend on the content: a stated window, a body limit, a refused
  // size. How many bytes a token takes is the conversation's (kept with its compaction).
  const lesson = lessonOf(verdict.reason, verdict.limits, rejectedBytes);
  if (tenant && Object.keys(lesson).length > 0) await memory.learn(tenant, ctx.upstream.memoryKey, model, lesson);
}

/** What rejections taught about the request's tenant and model, as far as it is believed for this request's size. */
export async function learnedBounds(ctx: RescueContext): Promise<Bounds | undefined> {
  const memory = ctx.deps.memory;
  const model = modelOf(ctx);
  const tenant = memory && model ? tenantFor(ctx) : null;
  return memory && model && tenant ? memory.limitFor(tenant, ctx.upstream.memoryKey, model, ctx.incoming.bytes) : undefined;
}

/**
 * The upstream accepted a request of `bytes` (what was sent: the client's, or a compaction ahead):
 * a limit learned for its tenant and model that says it could not fit is dropped
 * (memory/limits.ts). Only for a request large enough to disprove one (memory/index.ts mayLoosen), of a tenant the memory knows; the model as the access log read it off
 * the body's first bytes (never parsed for it). Resolves once the request's size is read (the body
 * is let go after); the store's read and write are not waited for.
 */
export async function noteAccepted(ctx: RescueContext, bytes: number): Promise<void> {
  const memory = ctx.deps.memory;
  const tenant = memory?.mayLoosen(bytes) ? tenantFor(ctx) : null;
  if (!memory || !tenant || !(await knows(ctx, memory, tenant))) return;
  const model = ctx.pathModel ?? ctx.notes.model;
  if (model) await memory.accepted(tenant, ctx.upstream.memoryKey, model, bytes);
}

/** Whether memory knows the request's tenant, asked once a request (a compaction ahead and the acceptance after it share the answer). */
export function knows(ctx: RescueContext, memory: CompactionMemory, tenant: string): Promise<boolean> {
  let known = askedTenants.get(ctx);
  if (known === undefined) askedTenants.set(ctx, (known = memory.knowsTenant(tenant)));
  return known;
}

const askedTenants = new WeakMap<RescueContext, Promise<boolean>>();

/** What `memory` remembers of this request's conversation: its tenant, upstream, API, model, kept prefix and agent session. */
export function recallOf(
  ctx: RescueContext,
  memory: CompactionMemory,
  tenant: string,
  conversation: Conversation,
): Promise<Recalled | null> {
  return memory.recall(
    tenant,
    ctx.upstream.memoryKey,
    ctx.dialect.api,
    modelOf(ctx) ?? '',
    conversation.items,
    keptPrefixEnd(conversation),
    agentSessionOf(ctx.clientHeaders),
  );
}

/** The remembered compaction this conversation extends, counted as a hit or a miss. */
export async function recallFor(ctx: RescueContext, conversation: Conversation): Promise<Recalled | null> {
  const memory = ctx.deps.memory;
  const tenant = memory ? tenantFor(ctx) : null;
  if (!memory || !tenant) return null;
  const recalled = await recallOf(ctx, memory, tenant, conversation);
  memory.countLookup(recalled);
  return recalled;
}

/** The conversation's key in memory, or null when it has none (memory off, no tenant). */
function sessionOf(ctx: RescueContext, conversation: Conversation): { memory: CompactionMemory; tenant: string; session: string } | null {
  const memory = ctx.deps.memory;
  const tenant = memory ? tenantFor(ctx) : null;
  if (!memory || !tenant) return null;
  return {
    memory,
    tenant,
    session: memory.session(
      tenant,
      ctx.upstream.memoryKey,
      ctx.dialect.api,
      modelOf(ctx) ?? '',
      conversation.items,
      keptPrefixEnd(conversation),
      agentSessionOf(ctx.clientHeaders),
    ),
  };
}

/**
 * Runs `work` (recall, compact, remember) holding the conversation's lease, so one request at a
 * time, on any replica, compacts a conversation: the others wait for it (up to
 * summarizer.timeoutMs, what its summary may take), then recall what it remembered and reuse it.
 * Past that wait, or with the store failing, `work` gets no lease: it compacts on its own and
 * remembers nothing. The lease is freed when `work` is done, before anything goes upstream.
 */
export async function underLease<T>(ctx: RescueContext, conversation: Conversation, work: (lease: Lease | null) => Promise<T>): Promise<T> {
  const at = sessionOf(ctx, conversation);
  const lease = at ? await at.memory.lease(at.session, ctx.deps.config.summarizer.timeoutMs, ctx.gone.signal) : null;
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
  const at = lease ? sessionOf(ctx, conversation) : null;
  const held = at && (lease === 'take' ? await at.memory.lease(at.session, 0) : lease);
  if (!at || !held) return;
  try {
    await at.memory.remember(held, at.tenant, conversation.items, span.fixedEnd, entryOf(span, target));
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
