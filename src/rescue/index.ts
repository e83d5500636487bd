import {
  DEFAULT_BYTES_PER_TOKEN,
  clampedCompletion,
  sizeTarget,
  smallest,
  type Bounds,
  type SizeTarget,
} from '../compaction/size-target.js';
import { digestInSlices } from '../memory/fingerprint.js';
import type { Conversation } from '../dialects/types.js';
import type { Verdict } from '../overlong/types.js';
import { isBindingRefusal, refusesBoundState } from '../overlong/classify.js';
import { decodeText, discard } from '../upstream/body.js';
import type { InspectedAnswer } from './inspect.js';
import { attempt } from './attempt.js';
import { compactProactively, proactiveMemory, type Proactive } from './proactive.js';
import { BECAUSE, compactFor } from './compact.js';
import { holdBudget, markedHeaders, optedOut, tooManyItems, type Decided, type RescueContext } from './context.js';
import { learnFrom, noteAccepted, rememberedFor, rememberSpan, rewriteOf, underLease, type Rewrite } from './memory.js';
import { identityOf } from './identity.js';
import {
  compactionHeader,
  countCompaction,
  countRescue,
  isProactive,
  logDecision,
  type RescueRecord,
  type ReplayResult,
} from './report.js';
import { noteRescue } from '../telemetry/traces.js';
import { isAgentCompaction } from './agent-compaction.js';
import { inApiWords } from './overflow-error.js';
import {
  heldCount,
  judgeAnswer,
  logStreamedCut,
  mayNearWindow,
  overWindow,
  truncationVerdict,
  watched,
  windowFor,
  type SentBody,
} from './window.js';
import type { CompactionMemory } from '../memory/index.js';
import { summarizerModel } from './summarizer-client.js';

/*
 * Written once for every API: attempt -> overlong and nothing sent yet? -> make the request smaller ->
 * replay once -> record. Only the context's dialect knows the wire format.
 */

export interface Outcome {
  answer: InspectedAnswer;
  header?: string;
  tail?: (bytes: Buffer) => void;
}

/** `committed` is the relay's one check of whether any byte reached the client. */
export async function serve(ctx: RescueContext, committed: () => boolean): Promise<Outcome> {
  try {
    return await attemptAndRescue(ctx, committed);
  } finally {
    // The answer may stream for minutes: the parsed body and its budget go now.
    letGoOfBody(ctx);
  }
}

function letGoOfBody(ctx: RescueContext): void {
  ctx.held?.();
  ctx.held = undefined;
  ctx.incoming.release();
}

async function attemptAndRescue(ctx: RescueContext, committed: () => boolean): Promise<Outcome> {
  const config = ctx.deps.config;
  const proactiveOn = config.compaction.proactive && config.compaction.maxReplays > 0 && !optedOut(ctx);
  const memory = proactiveOn ? proactiveMemory(ctx) : null;
  const proactive = memory || (proactiveOn && mayNearWindow(ctx)) ? await beforeFirst(ctx, memory) : null;
  if (!proactive) letGoOfBody(ctx);
  const sent = proactive ? await sendRewritten(ctx, proactive.record, proactive.rewrite) : null;
  const sentBytes = sent?.bytes ?? ctx.incoming.bytes;
  const watch = watched(ctx, sentBytes);
  const first = sent?.answer ?? (await attempt(ctx, ctx.incoming.wire, ctx.headers, undefined, watch));
  if (!proactive && isBindingRefusal(first.verdict)) ctx.deps.metrics.bindingRefusals.inc({ api: ctx.dialect.api, request: 'client' });
  if (proactive) countRescue(ctx.deps.metrics, proactive.record);
  const header = proactive ? noted(ctx, proactive.record) : undefined;
  if (first.verdict.overlong)
    return committed() ? { answer: first, header } : rescue(ctx, first, first.verdict, sentBytes, proactive !== null);
  if (first.response.status >= 400) return { answer: first, header };
  void noteAccepted(ctx, sentBytes).catch((err: Error) =>
    ctx.log.warn({ err: err.message }, 'could not note an accepted request in memory'),
  );
  if (!watch) return { answer: first, header };
  const body: SentBody = sent ? { bytes: sent.bytes, body: () => sent.body } : { bytes: sentBytes, body: () => ctx.incoming.plain() };
  const count = heldCount(ctx, first);
  if (count === undefined) return { answer: first, header, tail: (tail) => judgeStreamed(ctx, body, tail) };
  const cut = judgeAnswer(ctx, body, count, 'held');
  // A silent cut seen before any byte was relayed is rescued as a refusal would be, once.
  if (!cut.truncated || committed()) return { answer: first, header };
  return rescue(ctx, first, truncationVerdict(cut), sentBytes, proactive !== null, 'truncated');
}

async function beforeFirst(ctx: RescueContext, memory: CompactionMemory | null): Promise<Proactive | null> {
  return (memory ? await compactProactively(ctx, memory) : null) ?? (mayNearWindow(ctx) ? await fitToWindow(ctx) : null);
}

/** As if the upstream had refused it with that window: the refusal, or the silent cut, is not waited for. */
async function fitToWindow(ctx: RescueContext): Promise<Proactive | null> {
  const over = await overWindow(ctx);
  const json = over ? ctx.incoming.json : null;
  if (!over || !json || tooManyItems(json)) return null;
  const { verdict, window } = over;
  const { api } = ctx.dialect;
  const record: RescueRecord = {
    api,
    upstream: ctx.upstream.name,
    outcome: 'compacted',
    trigger: 'window',
    reason: 'context_length',
    limit: window.source,
    window: { tokens: window.tokens, estimate: verdict.limits.promptTokens ?? 0, model: ctx.pathModel ?? ctx.notes.model },
  };
  const rewrite = await remedy(ctx, record, verdict, json, ctx.incoming.bytes, false);
  if (!rewrite) {
    logDecision(ctx.log, record);
    countRescue(ctx.deps.metrics, record);
    ctx.deps.decisions?.decided(record, decided(ctx, record));
    return null;
  }
  record.outcome = 'compacted';
  ctx.deps.metrics.windowCompactions.inc({ api, upstream: ctx.upstream.name, source: window.source });
  return { rewrite, record };
}

function judgeStreamed(ctx: RescueContext, body: SentBody, tail: Buffer): void {
  const count = ctx.dialect.promptCount(tail.toString('utf8'));
  if (count === undefined) return;
  const cut = judgeAnswer(ctx, body, count, 'streamed');
  if (!cut.truncated) return;
  logStreamedCut(ctx, cut, body.bytes);
  const streamed = {
    api: ctx.dialect.api,
    upstream: ctx.upstream.name,
    reportedTokens: cut.reported,
    expectedTokens: cut.expected,
    bytes: body.bytes,
  };
  ctx.deps.decisions?.cutStreamed(streamed, { requestId: ctx.requestId, model: ctx.pathModel ?? ctx.notes.model });
}

/** At most one remedy and one replay a rejection; when the gateway cannot help, the upstream's own error. */
async function rescue(
  ctx: RescueContext,
  first: InspectedAnswer,
  verdict: Extract<Verdict, { overlong: true }>,
  rejectedBytes: number,
  afterProactive: boolean,
  trigger: 'rejected' | 'truncated' = 'rejected',
): Promise<Outcome> {
  const { deps, dialect } = ctx;
  const hold = await holdBudget(ctx, deps.config.compaction.rescueWaitMs);
  if (!hold.held && ctx.gone.aborted) throw new Error('the client disconnected while its rescue waited for the budget');
  const json = hold.held ? await ctx.incoming.load() : null;
  // Judged beside the request: what the client wrote and the error echoes makes no verdict (a value
  // quoting "maximum context length is 40 tokens"). A silent cut has no text to echo.
  const judged = json && trigger === 'rejected' ? first.judge(json) : verdict;
  if (!judged.overlong) return { answer: first };
  const { reason, limits } = judged;
  const record: RescueRecord = {
    api: dialect.api,
    upstream: ctx.upstream.name,
    outcome: 'disabled',
    trigger,
    reason,
    rejectedStatus: first.response.status,
  };
  if (trigger === 'truncated') {
    Object.assign(record, {
      limit: 'observed',
      window: { tokens: limits.limitTokens ?? 0, estimate: limits.promptTokens ?? 0, model: identityOf(ctx).model ?? ctx.notes.model },
    });
  } else {
    record.statedTokens = limits.limitTokens;
    deps.metrics.overlong.inc({ api: dialect.api, reason, upstream: ctx.upstream.name });
    const model = identityOf(ctx).model ?? ctx.notes.model;
    if (model && limits.limitTokens) deps.windows.contradicted(ctx.upstream, model, limits.limitTokens);
  }
  if (!hold.held) return shed(ctx, record, first, hold.cost);
  if (json) await learnFrom(ctx, judged, rejectedBytes);
  if (deps.config.compaction.maxReplays === 0 || optedOut(ctx)) return passThrough(ctx, record, first);
  // A body whose content coding could not be undone is forwarded as it came, and the header says why.
  if (!json)
    return notShrunk(
      ctx,
      record,
      first,
      ctx.incoming.tooManyItems ? 'too_many_items' : ctx.incoming.plain() === null ? 'undecodable_body' : 'no_messages',
      rejectedBytes,
    );
  if (tooManyItems(json)) return notShrunk(ctx, record, first, 'too_many_items', rejectedBytes);
  const rewrite = await remedy(ctx, record, judged, json, rejectedBytes, afterProactive);
  return rewrite ? replay(ctx, record, first, rewrite) : passThrough(ctx, record, first);
}

/** Lossless first (a lowered completion limit), else the upstream's own truncation, else compaction. */
async function remedy(
  ctx: RescueContext,
  record: RescueRecord,
  verdict: Extract<Verdict, { overlong: true }>,
  json: Record<string, unknown>,
  rejectedBytes: number,
  afterProactive: boolean,
): Promise<Rewrite | null> {
  const { deps, dialect } = ctx;
  const { reason, limits } = verdict;
  const requested = dialect.completion(json);
  const lowered = clampedCompletion(reason, limits, requested, deps.config.compaction.minCompletionTokens);
  const clamped = lowered !== null ? dialect.withCompletion(json, lowered) : null;
  if (clamped && requested) {
    Object.assign(record, { remedy: 'clamp', limit: record.limit ?? 'stated', completion: { before: requested, after: lowered } });
    return plain(clamped);
  }
  const conversation = dialect.read(json);
  if (!conversation) {
    const truncated = dialect.serverSideRescue(json);
    if (!truncated) {
      notShrunkRecord(record, 'no_messages', rejectedBytes);
      return null;
    }
    record.remedy = 'truncation';
    return plain(truncated);
  }
  return compacted(ctx, record, verdict, conversation, rejectedBytes, afterProactive);
}

async function compacted(
  ctx: RescueContext,
  record: RescueRecord,
  verdict: Extract<Verdict, { overlong: true }>,
  conversation: Conversation,
  rejectedBytes: number,
  afterProactive: boolean,
): Promise<Rewrite | null> {
  const { deps, dialect } = ctx;
  const json = ctx.incoming.json!;
  const started = performance.now();
  const rejection = { reason: verdict.reason, limits: verdict.limits, bodyBytes: rejectedBytes, requested: dialect.completion(json) };
  if (deps.memory) await digestInSlices(conversation.items);
  // One request at a time compacts a conversation, on any replica: another's summary is recalled, not made twice.
  const agents = isAgentCompaction(ctx, json);
  if (agents) record.agentCompaction = true;
  const { compaction, used, remembered } = await underLease(ctx, conversation, async (lease) => {
    const remembered = await rememberedFor(ctx, afterProactive || agents ? null : conversation);
    const recalled = remembered.entry ?? undefined;
    const ratio = deps.config.compaction.targetRatio;
    const learned = withKnownWindow(ctx, verdict, remembered.bounds);
    const target = sizeTarget(rejection, learned, ratio, recalled?.bytesPerToken);
    const because = BECAUSE[verdict.reason === 'body_too_large' ? 'body_too_large' : 'context_length'];
    const compactTo = (to: SizeTarget) =>
      compactFor(ctx, json, conversation, to, { because, recalled, logSummary: true, digestOnly: agents });
    let used = target;
    let compaction = await compactTo(used);
    // What other requests taught must not make this one unrescuable: tried once more with its own rejection's.
    const own = learned ? sizeTarget(rejection, undefined, ratio, recalled?.bytesPerToken) : null;
    if (compaction.outcome === 'not_shrunk' && compaction.why === 'cannot_fit' && own && own.fitBytes > target.fitBytes) {
      used = own;
      compaction = await compactTo(used);
    }
    if (compaction.outcome === 'compacted' && compaction.newSpan && !agents)
      await rememberSpan(ctx, conversation, compaction.newSpan, used, lease);
    return { compaction, used, remembered: lease !== null && !agents };
  });
  Object.assign(record, { remedy: 'compaction', compaction, limit: record.limit ?? used.source, durationMs: performance.now() - started });
  countCompaction(deps.metrics, dialect.api, compaction, record.durationMs!, { upstream: ctx.upstream.name, model: summarizerModel(ctx) });
  if (compaction.outcome !== 'compacted') {
    record.outcome = 'not_shrunk';
    return null;
  }
  record.bound = compaction.bound;
  return rewriteOf(ctx, conversation, compaction, used, remembered);
}

function withKnownWindow(
  ctx: RescueContext,
  verdict: Extract<Verdict, { overlong: true }>,
  learned: Bounds | undefined,
): Bounds | undefined {
  if (verdict.limits.limitTokens !== undefined) return learned;
  const window = windowFor(ctx);
  return window ? smallest(learned ?? {}, { limitTokens: window.tokens, completionCounted: window.completionCounted }) : learned;
}

async function replay(ctx: RescueContext, record: RescueRecord, first: InspectedAnswer, rewrite: Rewrite): Promise<Outcome> {
  record.outcome = 'replayed';
  discard(first.response.body);
  let answer: InspectedAnswer;
  try {
    ({ answer } = await sendRewritten(ctx, record, rewrite));
  } catch (err) {
    Object.assign(record, {
      outcome: 'replay_failed',
      replayResult: 'failed',
      replayError: (err as Error).message,
      clientLeft: ctx.gone.aborted || undefined,
    });
    countRescue(ctx.deps.metrics, record, 'failed');
    // The replay never got an answer: the upstream's own first answer is the truest thing to give.
    const given = ctx.gone.aborted || !first.held.complete ? null : forClient(ctx, record, first);
    logDecision(ctx.log, record);
    if (!given) throw err;
    return finish(ctx, record, given);
  }
  const result = replayResult(answer);
  if (result !== 'success') record.outcome = 'replay_failed';
  Object.assign(record, { replayStatus: answer.response.status, replayResult: result });
  countRescue(ctx.deps.metrics, record, result);
  const given = forClient(ctx, record, answer);
  logDecision(ctx.log, record);
  return finish(ctx, record, given);
}

function plain(body: Buffer): Rewrite {
  return { body, headers: {}, restrip: async () => null };
}

/**
 * A binding 400 on the rewrite is the gateway's own doing: it is sent once more with every bound block after
 * the edit point stripped, and memory says so from then on. The one exception to "replay once".
 */
async function sendRewritten(ctx: RescueContext, record: RescueRecord, rewrite: Rewrite): Promise<Sent> {
  const send = (r: Pick<Rewrite, 'body' | 'headers'>) =>
    attempt(ctx, r.body, { ...markedHeaders(ctx.headers, compactionHeader(record)), ...r.headers }, record, watched(ctx, r.body.length));
  const countRefusal = (a: InspectedAnswer) =>
    isBindingRefusal(a.verdict) && ctx.deps.metrics.bindingRefusals.inc({ api: ctx.dialect.api, request: 'compacted' });
  let answer: InspectedAnswer | undefined;
  try {
    let body = rewrite.body;
    answer = await send(rewrite);
    countRefusal(answer);
    const again = refusesBoundState(answer.verdict) ? await rewrite.restrip() : null;
    if (again) {
      discard(answer.response.body);
      ctx.log.warn(
        { api: ctx.dialect.api, rule: answer.verdict.rule, status: answer.response.status },
        'the upstream refused the bound thinking of the rewritten request; sending it once more with every thinking block after the edit stripped',
      );
      Object.assign(record, { bound: again.bound, bindingRetry: true });
      body = again.body;
      answer = await send(again);
      countRefusal(answer);
    }
    noteBound(ctx, record, answer);
    return { answer, bytes: body.length, body };
  } finally {
    if (isProactive(record)) logDecision(ctx.log, record, answer);
  }
}

interface Sent {
  answer: InspectedAnswer;
  bytes: number;
  body: Buffer;
}

function noteBound(ctx: RescueContext, record: RescueRecord, answer: InspectedAnswer): void {
  const api = ctx.dialect.api;
  if (record.bound?.stripped) ctx.deps.metrics.boundBlocks.inc({ api, action: 'stripped' }, record.bound.stripped);
  if (answer.response.status >= 400) return;
  const dropped = ctx.dialect.droppedState?.(decodeText(answer.held.bytes, answer.response.headers['content-encoding']));
  if (dropped === undefined) return;
  record.stateDropped = dropped;
  if (dropped > 0) ctx.deps.metrics.boundBlocks.inc({ api, action: 'dropped' }, dropped);
}

function noted(ctx: RescueContext, record: RescueRecord): string {
  const header = compactionHeader(record);
  ctx.notes.compaction = header;
  noteRescue(record, header);
  ctx.deps.decisions?.decided(record, decided(ctx, record));
  return header;
}

function decided(ctx: RescueContext, record: RescueRecord): Decided {
  return { requestId: ctx.requestId, model: record.window?.model ?? ctx.pathModel ?? ctx.notes.model };
}

function notShrunk(
  ctx: RescueContext,
  record: RescueRecord,
  first: InspectedAnswer,
  why: 'no_messages' | 'too_many_items' | 'undecodable_body',
  bytes: number,
): Outcome {
  notShrunkRecord(record, why, bytes);
  return passThrough(ctx, record, first);
}

function notShrunkRecord(record: RescueRecord, why: 'no_messages' | 'too_many_items' | 'undecodable_body', bytes: number): void {
  record.outcome = 'not_shrunk';
  record.compaction = { outcome: 'not_shrunk', why, summarizerCalls: 0, messagesBefore: 0, bytesBefore: bytes, tokensBefore: 0 };
}

/** Too many bytes under rescue: the upstream's own answer, and the process stays up for everyone. */
function shed(ctx: RescueContext, record: RescueRecord, first: InspectedAnswer, cost: number): Outcome {
  record.outcome = 'shed';
  record.budget = { inUse: ctx.deps.budget.inUse, limit: ctx.deps.budget.limitBytes, cost };
  return passThrough(ctx, record, first);
}

function passThrough(ctx: RescueContext, record: RescueRecord, first: InspectedAnswer): Outcome {
  const answer = forClient(ctx, record, first);
  logDecision(ctx.log, record);
  countRescue(ctx.deps.metrics, record);
  return finish(ctx, record, answer);
}

function finish(ctx: RescueContext, record: RescueRecord, answer: InspectedAnswer): Outcome {
  return { answer, header: noted(ctx, record) };
}

function forClient(ctx: RescueContext, record: RescueRecord, answer: InspectedAnswer): InspectedAnswer {
  const translated = record.outcome === 'replayed' ? null : overflowInApiWords(ctx, record, answer);
  if (translated) record.overflowError = 'translated';
  return translated ?? answer;
}

/** In the API's own overflow words when the upstream's are not (an nginx 413 page): the agent's own compaction then starts. */
function overflowInApiWords(ctx: RescueContext, record: RescueRecord, answer: InspectedAnswer): InspectedAnswer | null {
  // With the rescue off (maxReplays 0) the gateway is a plain proxy: nothing is translated either.
  const { translateOverflow, maxReplays } = ctx.deps.config.compaction;
  if (!translateOverflow || maxReplays === 0 || !answer.verdict.overlong) return null;
  const limits = answer.verdict.limits;
  const model = identityOf(ctx).model ?? ctx.notes.model;
  const bytesPerToken = (model && ctx.deps.windows.bytesPerToken(ctx.upstream, model)) || DEFAULT_BYTES_PER_TOKEN;
  const prompt = limits.promptTokens ?? record.compaction?.tokensBefore ?? Math.ceil(ctx.incoming.bytes / bytesPerToken);
  return inApiWords(ctx.dialect.api, answer, prompt || 1, limits.limitTokens ?? windowFor(ctx, model)?.tokens);
}

function replayResult(replay: InspectedAnswer): ReplayResult {
  if (replay.verdict.overlong) return 'still_overlong';
  return replay.response.status >= 400 ? 'upstream_error' : 'success';
}
