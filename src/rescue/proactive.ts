import { DEFAULT_BYTES_PER_TOKEN, learnedTarget, type Bounds, type SizeTarget } from '../compaction/size-target.js';
import type { Conversation } from '../dialects/types.js';
import type { CompactionMemory, Lease, MemoryEntry } from '../memory/index.js';
import { BECAUSE, compactFor } from './compact.js';
import { holdBudget, tooManyItems, type RescueContext } from './context.js';
import { identityOf } from './identity.js';
import { rememberSpan, rewriteOf, underLease, type Rewrite } from './memory.js';
import { countCompaction, type RescueRecord } from './report.js';
import { isAgentCompaction } from './agent-compaction.js';
import { summarizerModel } from './summarizer-client.js';

export interface Proactive {
  rewrite: Rewrite;
  record: RescueRecord;
}

/** Null: not even the credential is hashed, and the first attempt waits on no promise. A learned limit opens nothing. */
export function proactiveMemory(ctx: RescueContext): CompactionMemory | null {
  const memory = ctx.deps.memory;
  return memory?.mayRecall(ctx.incoming.bytes) ? memory : null;
}

/** Learned limits set the target; they never trigger a compaction on their own. */
export async function compactProactively(ctx: RescueContext, memory: CompactionMemory): Promise<Proactive | null> {
  const identity = identityOf(ctx);
  const tenant = identity.tenant;
  if (!tenant || ctx.incoming.bytes < (await identity.reach(memory, tenant)).extending) return null;
  if (!(await holdBudget(ctx, 0)).held) return null;
  const json = await ctx.incoming.load();
  const conversation = json && !tooManyItems(json) ? ctx.dialect.read(json) : null;
  if (!json || !conversation || isAgentCompaction(ctx, json)) return null;
  const thread = identity.thread(memory, conversation);
  if (!thread || !(await memory.remembered(thread, ctx.incoming.bytes)).entry) return null;
  const started = performance.now();
  // Recalled afresh under the lease: another request may have extended it meanwhile.
  return underLease(ctx, conversation, async (lease) => {
    const remembered = await memory.remembered(thread, ctx.incoming.bytes);
    if (!remembered.entry) return null;
    memory.countLookup(remembered.entry);
    return proactivelyUnderLease(ctx, conversation, json, { entry: remembered.entry, bounds: remembered.bounds }, lease, started);
  });
}

async function proactivelyUnderLease(
  ctx: RescueContext,
  conversation: Conversation,
  json: Record<string, unknown>,
  recalled: { entry: MemoryEntry; bounds: Bounds | undefined },
  lease: Lease | null,
  started: number,
): Promise<Proactive | null> {
  const memory = ctx.deps.memory!;
  const bytes = ctx.incoming.bytes;
  const { entry } = recalled;
  const target = proactiveTarget(entry, bytes, recalled.bounds, ctx);
  const compaction = await compactFor(ctx, json, conversation, target, { because: BECAUSE.ahead, recalled: entry });
  const durationMs = performance.now() - started;
  countCompaction(ctx.deps.metrics, ctx.dialect.api, compaction, durationMs, { upstream: ctx.upstream.name, model: summarizerModel(ctx) });
  if (compaction.outcome !== 'compacted') return null;
  // Not what was learned since: a lesson is applied afresh each time, and may be dropped.
  const remembered = { ...target, fitBytes: entry.fitBytes, aimBytes: entry.aimBytes };
  if (compaction.newSpan) await rememberSpan(ctx, conversation, compaction.newSpan, remembered, lease);
  memory.countProactive();
  const record: RescueRecord = {
    api: ctx.dialect.api,
    upstream: ctx.upstream.name,
    outcome: 'compacted',
    trigger: 'proactive',
    compaction,
    bound: compaction.bound,
    limit: 'learned',
    statedTokens: target.bounds?.limitTokens,
    durationMs,
  };
  return { rewrite: rewriteOf(ctx, conversation, compaction, remembered, lease !== null), record };
}

function proactiveTarget(entry: MemoryEntry, bytes: number, learned: Bounds | undefined, ctx: RescueContext): SizeTarget {
  const ratio = ctx.deps.config.compaction.targetRatio;
  const bytesPerToken = entry.bytesPerToken ?? DEFAULT_BYTES_PER_TOKEN;
  const fromLearned = learned ? learnedTarget(bytes, learned, ratio, ctx.dialect.completion(ctx.incoming.json ?? {}), bytesPerToken) : null;
  const fitBytes = Math.min(entry.fitBytes, fromLearned?.fitBytes ?? Infinity);
  return {
    fitBytes,
    aimBytes: Math.min(entry.aimBytes, fromLearned?.aimBytes ?? Infinity, fitBytes),
    bytesPerToken,
    tokensBefore: Math.round(bytes / bytesPerToken),
    source: 'learned',
    bounds: learned,
    exact: fromLearned?.exact ?? false,
  };
}
