import type { FastifyRequest } from 'fastify';
import { compact, isMessageArray, requestedCompletion, type CompactionResult } from '../compaction/index.js';
import { leadingInstructionsEnd } from '../compaction/plan.js';
import { compactionHeader, countCompaction, logDecision, type RescueRecord } from '../compaction/report.js';
import { sizeTarget, type SizeTarget } from '../compaction/target.js';
import { chainDigests, tenantOf } from '../memory/fingerprint.js';
import type { LearnedLimit, Recalled } from '../memory/index.js';
import type { OverlongReason, StatedLimits } from '../overlong/types.js';
import type { ChatDeps } from './chat.js';
import type { ChatRequest } from './chat-body.js';
import { credentials } from './rescue.js';

/** The remembered compaction this request extends, counted as a hit or a miss. */
export async function recallFor(deps: ChatDeps, request: FastifyRequest, json: Record<string, unknown>): Promise<Recalled | null> {
  const messages = json.messages;
  if (!deps.memory || !isMessageArray(messages)) return null;
  const recalled = await deps.memory.recall(tenantOf(request.headers), messages, leadingInstructionsEnd(messages));
  deps.memory.countLookup(recalled);
  return recalled;
}

/** Remembers the span a new summary stands for, so later turns of the conversation reuse it. */
export async function rememberSpan(
  deps: ChatDeps,
  request: FastifyRequest,
  json: Record<string, unknown>,
  compaction: CompactionResult,
  recalled: Recalled | null,
  bodyTargetBytes: number,
): Promise<void> {
  if (!deps.memory || compaction.outcome !== 'compacted' || !compaction.newSpan) return;
  const span = compaction.newSpan;
  const messages = json.messages as Parameters<typeof chainDigests>[0];
  const session = recalled?.session ?? deps.memory.session(tenantOf(request.headers), messages, span.headEnd);
  const digest = chainDigests(messages, span.headEnd, span.spanLength).at(-1);
  if (!digest) return;
  await deps.memory.remember(session, {
    spanLength: span.spanLength,
    spanDigest: digest,
    pinnedOffsets: span.pinnedOffsets,
    summary: span.summary,
    summarizedCount: span.summarizedCount,
    strategy: span.strategy,
    summarizerCalls: span.summarizerCalls,
    bodyTargetBytes,
    createdAt: Date.now(),
  });
}

/** A rejection that states a limit teaches it, per upstream (one per gateway) and model. */
export async function learnFrom(
  deps: ChatDeps,
  chat: ChatRequest,
  reason: OverlongReason,
  limits: StatedLimits,
  rejectedBytes: number,
): Promise<void> {
  const model = typeof chat.json?.model === 'string' ? chat.json.model : undefined;
  if (!deps.memory || !model) return;
  const learned: LearnedLimit = {};
  if (reason === 'context_length' && limits.limitTokens) {
    learned.limitTokens = limits.limitTokens;
    if (limits.promptTokens) learned.bytesPerToken = rejectedBytes / limits.promptTokens;
  }
  if (reason === 'body_too_large' && limits.limitBytes) learned.limitBytes = limits.limitBytes;
  if (Object.keys(learned).length > 0) await deps.memory.learn(model, learned);
}

export interface Proactive {
  body: Buffer;
  header: string;
}

/**
 * Proactive mode: a request that extends a remembered compaction, or whose estimate is over a
 * learned limit, is compacted before its first attempt, skipping the rejection that would surely
 * come. Returns null when the request should go as the client sent it.
 */
export async function compactProactively(
  deps: ChatDeps,
  request: FastifyRequest,
  chat: ChatRequest,
  headers: Record<string, string | string[]>,
  signal: AbortSignal,
): Promise<Proactive | null> {
  const json = chat.json;
  if (!deps.memory || !json || !isMessageArray(json.messages)) return null;
  const model = typeof json.model === 'string' ? json.model : '';
  const learned = model ? await deps.memory.limitFor(model) : undefined;
  const requested = requestedCompletion(json);
  const bytes = chat.bytes;
  const over = learned ? overLearnedLimit(learned, bytes, requested) : false;
  // Under a known limit, the request fits as it is, remembered or not.
  if (learned && (learned.limitTokens || learned.limitBytes) && !over) return null;
  const recalled = await deps.memory.recall(tenantOf(request.headers), json.messages, leadingInstructionsEnd(json.messages));
  if (!recalled && !over) return null;
  deps.memory.countLookup(recalled);

  const started = performance.now();
  const target = over ? learnedTarget(learned!, bytes, requested) : rememberedTarget(recalled!, bytes);
  const compaction = await compact({
    request: json,
    bodyBytes: bytes,
    target,
    config: deps.config,
    dispatcher: deps.dispatcher,
    upstreamUrl: deps.config.upstream.url,
    requestAuth: credentials(headers),
    signal,
    recalled: recalled?.entry,
  });
  countCompaction(deps.metrics, compaction, performance.now() - started);
  if (compaction.outcome !== 'compacted') return null;
  await rememberSpan(deps, request, json, compaction, recalled, target.bodyBytes);
  deps.memory.countProactive();
  const record: RescueRecord = { outcome: 'compacted', trigger: 'proactive', compaction, durationMs: performance.now() - started };
  logDecision(request.log, record);
  const header = compactionHeader(record);
  request.notes.compaction = header;
  return { body: compaction.body, header };
}

function overLearnedLimit(learned: LearnedLimit, bodyBytes: number, requested: number | undefined): boolean {
  if (learned.limitBytes && bodyBytes > learned.limitBytes) return true;
  if (!learned.limitTokens) return false;
  const tokens = bodyBytes / (learned.bytesPerToken ?? 3);
  return tokens > learned.limitTokens - (requested ?? 0);
}

function learnedTarget(learned: LearnedLimit, bodyBytes: number, requested: number | undefined): SizeTarget {
  if (learned.limitBytes && bodyBytes > learned.limitBytes) {
    return sizeTarget('body_too_large', { limitBytes: learned.limitBytes }, bodyBytes, requested);
  }
  const promptTokens = Math.round(bodyBytes / (learned.bytesPerToken ?? 3));
  return sizeTarget('context_length', { limitTokens: learned.limitTokens, promptTokens }, bodyBytes, requested);
}

function rememberedTarget(recalled: Recalled, bodyBytes: number): SizeTarget {
  return { bodyBytes: Math.min(recalled.entry.bodyTargetBytes, bodyBytes), bytesPerToken: 3, tokensBefore: Math.round(bodyBytes / 3) };
}
