import type { FastifyRequest } from 'fastify';
import { compact, requestedCompletion, type CompactionResult } from '../compaction/index.js';
import { compactionHeader, countCompaction, countRescue, logDecision, type RescueRecord, type ReplayResult } from '../compaction/report.js';
import { sizeTarget } from '../compaction/target.js';
import type { OverlongReason, StatedLimits } from '../overlong/types.js';
import { discard } from '../upstream/body.js';
import { CLIENT_CREDENTIALS } from '../upstream/headers.js';
import type { InspectedAnswer } from '../upstream/inspect.js';
import type { Attempt, ChatDeps } from './chat.js';
import type { ChatRequest } from './chat-body.js';
import { learnFrom, recallFor, rememberSpan } from './memory.js';

export interface RescueInput {
  deps: ChatDeps;
  request: FastifyRequest;
  chat: ChatRequest;
  /** Size of the body the upstream rejected: the original (decoded), or a proactively compacted one. */
  rejectedBytes: number;
  headers: Record<string, string | string[]>;
  /** The first attempt, judged overlong, with nothing sent to the client yet. */
  first: InspectedAnswer;
  verdict: { reason: OverlongReason; limits: StatedLimits };
  send: Attempt;
  signal: AbortSignal;
  /** Set after a proactive compaction was rejected: memory already had its say. */
  skipMemory: boolean;
}

export interface Rescued {
  /** What the client gets: the replay's answer, or the first attempt's when there was no replay. */
  answer: InspectedAnswer;
  header: string;
}

/**
 * One rejection costs at most one compaction and one replay. When the gateway cannot help
 * (opted out, nothing worth shrinking), the client gets the upstream's own error untouched.
 */
export async function rescue(input: RescueInput): Promise<Rescued> {
  const { deps, request, first } = input;
  const { reason, limits } = input.verdict;
  const record: RescueRecord = { outcome: 'disabled', trigger: 'rejected', reason, rejectedStatus: first.answer.status };
  deps.metrics.overlong.inc({ reason });
  await learnFrom(deps, input.chat, reason, limits, input.rejectedBytes);

  if (!replayAllowed(input)) return passThrough(input, record);

  const json = input.chat.json!;
  const started = performance.now();
  const recalled = input.skipMemory ? null : await recallFor(deps, request, json);
  const target = sizeTarget(reason, limits, input.rejectedBytes, requestedCompletion(json));
  const compaction: CompactionResult = await compact({
    request: json,
    bodyBytes: input.chat.bytes,
    target,
    config: deps.config,
    dispatcher: deps.dispatcher,
    upstreamUrl: deps.config.upstream.url,
    requestAuth: credentials(input.headers),
    signal: input.signal,
    recalled: recalled?.entry,
  });
  record.compaction = compaction;
  record.durationMs = performance.now() - started;
  countCompaction(deps.metrics, compaction, record.durationMs);
  if (compaction.outcome !== 'compacted') {
    record.outcome = 'not_shrunk';
    return passThrough(input, record);
  }
  await rememberSpan(deps, request, json, compaction, recalled, target.bodyBytes);

  record.outcome = 'replayed';
  logDecision(request.log, record);
  discard(first.answer.body);
  let replay: InspectedAnswer;
  try {
    replay = await input.send(compaction.body, replayHeaders(input.headers, compactionHeader(record)));
  } catch (err) {
    record.outcome = 'replay_failed';
    countRescue(deps.metrics, record, 'failed');
    // The replay never got an answer: the upstream's own first answer is the truest thing to give.
    if (input.signal.aborted || !first.held.complete) throw err;
    request.log.warn({ err }, 'the replay failed before the upstream answered; passing the original rejection through');
    return finish(request, record, first);
  }
  const result = replayResult(replay);
  if (result !== 'success') record.outcome = 'replay_failed';
  record.replayStatus = replay.answer.status;
  countRescue(deps.metrics, record, result);
  return finish(request, record, replay);
}

/** The request's own headers, marked; the compacted body is plain JSON, whatever the client's encoding. */
export function replayHeaders(headers: Record<string, string | string[]>, header: string): Record<string, string | string[]> {
  const { 'content-encoding': _encoding, ...rest } = headers;
  return { ...rest, 'x-gateway-compaction': header };
}

export function optedOut(request: FastifyRequest): boolean {
  return String(request.headers['x-gateway-compaction'] ?? '').trim().toLowerCase() === 'off';
}

function replayAllowed({ deps, chat, request }: RescueInput): boolean {
  return deps.config.compaction.maxReplays > 0 && !optedOut(request) && chat.json !== null;
}

function passThrough(input: RescueInput, record: RescueRecord): Rescued {
  logDecision(input.request.log, record);
  countRescue(input.deps.metrics, record);
  return finish(input.request, record, input.first);
}

function finish(request: FastifyRequest, record: RescueRecord, answer: InspectedAnswer): Rescued {
  const header = compactionHeader(record);
  request.notes.compaction = header;
  return { answer, header };
}

function replayResult(replay: InspectedAnswer): ReplayResult {
  if (replay.verdict.overlong) return 'still_overlong';
  return replay.answer.status >= 400 ? 'upstream_error' : 'success';
}

/** The credentials the request itself used upstream: the summarizer's default. */
export function credentials(headers: Record<string, string | string[]>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of CLIENT_CREDENTIALS) {
    const value = headers[name];
    if (typeof value === 'string') out[name] = value;
  }
  return out;
}
