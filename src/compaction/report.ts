import type { FastifyBaseLogger } from 'fastify';
import type { Metrics } from '../metrics.js';
import type { OverlongReason } from '../overlong/types.js';
import type { CompactionResult } from './index.js';

export type Outcome = 'replayed' | 'replay_failed' | 'not_shrunk' | 'disabled' | 'compacted';
export type ReplayResult = 'success' | 'upstream_error' | 'still_overlong' | 'failed';

/** Everything one rescue did, as the header, the log line and the metrics tell it. */
export interface RescueRecord {
  outcome: Outcome;
  /** What set the compaction off: an overlong rejection, or memory before the first attempt. */
  trigger: 'rejected' | 'proactive';
  /** Absent for a proactive compaction, which had no rejection. */
  reason?: OverlongReason;
  rejectedStatus?: number;
  compaction?: CompactionResult;
  durationMs?: number;
  replayStatus?: number;
}

/**
 * The `x-gateway-compaction` value: an RFC 8941 dictionary of tokens and integers, e.g.
 * `outcome=replayed, reason=context_length, strategy=summarize, messages-before=212, ...`.
 */
export function compactionHeader(r: RescueRecord): string {
  const c = r.compaction;
  const fields: Array<[string, string | number | undefined]> = [
    ['outcome', r.outcome],
    ['trigger', r.trigger],
    ['reason', r.reason],
    ['memory', c?.outcome === 'compacted' ? c.memory : undefined],
    ['strategy', c?.outcome === 'compacted' ? c.strategy : undefined],
    ['why', c?.outcome === 'not_shrunk' ? c.why : undefined],
    ['messages-before', c?.messagesBefore],
    ['messages-after', c?.outcome === 'compacted' ? c.messagesAfter : undefined],
    ['bytes-before', c?.bytesBefore],
    ['bytes-after', c?.outcome === 'compacted' ? c.bytesAfter : undefined],
    ['tokens-before', c?.tokensBefore],
    ['tokens-after', c?.outcome === 'compacted' ? c.tokensAfter : undefined],
    ['summarizer-ms', c?.outcome === 'compacted' ? c.summarizerMs : undefined],
    ['summarizer-failure', c?.outcome === 'compacted' ? c.summarizerFailure : undefined],
    ['replay-status', r.replayStatus],
  ];
  return fields
    .filter(([, v]) => v !== undefined)
    .map(([k, v]) => `${k}=${typeof v === 'number' ? Math.round(v) : v}`)
    .join(', ');
}

/** The one WARN line a rescue writes when it decides, with the numbers in the sentence. */
export function logDecision(log: FastifyBaseLogger, r: RescueRecord): void {
  const c = r.compaction;
  const rejected =
    r.trigger === 'proactive'
      ? 'request extends a conversation compacted before'
      : `upstream rejected the request as overlong (${r.rejectedStatus} ${r.reason})`;
  const fields = { compaction: { ...r, compaction: c && { ...c, body: undefined, newSpan: undefined } } };
  if (r.outcome === 'disabled') {
    log.warn(fields, `${rejected}: compaction is disabled for this request; passing the upstream error through`);
  } else if (c?.outcome === 'not_shrunk') {
    log.warn(fields, `${rejected}: no useful compaction (${c.why}, ${c.messagesBefore} messages, ${size(c.bytesBefore)}); passing the upstream error through`);
  } else if (c?.outcome === 'compacted') {
    const took = c.summarizerMs !== undefined ? `, ${seconds(c.summarizerMs)}` : '';
    const fellBack = c.summarizerFailure ? ` after the summarizer failed (${c.summarizerFailure})` : '';
    const reused = c.memory === 'hit' ? ', reusing a remembered summary' : '';
    const then = r.trigger === 'proactive' ? 'sending it compacted' : 'replaying once';
    log.warn(
      fields,
      `${rejected}: compacted ${c.messagesBefore} messages into ${c.messagesAfter} (${size(c.bytesBefore)} -> ${size(c.bytesAfter)}, ${c.strategy}${took}${reused})${fellBack}, ${then}`,
    );
  }
}

export function countRescue(metrics: Metrics, r: RescueRecord, replay?: ReplayResult): void {
  const c = r.compaction;
  metrics.compactions.inc({ strategy: c?.outcome === 'compacted' ? c.strategy : 'none', outcome: r.outcome });
  if (replay) metrics.replays.inc({ result: replay });
}

/** Counted when the decision is made, before the replay's answer is known. */
export function countCompaction(metrics: Metrics, c: CompactionResult, durationMs: number): void {
  metrics.compactionDuration.observe(durationMs / 1000);
  if (c.summarizerCalls > 0) metrics.summarizerCalls.inc(c.summarizerCalls);
  if (c.outcome !== 'compacted') return;
  if (c.summarizerFailure) metrics.summarizerFailures.inc({ kind: c.summarizerFailure });
  if (c.summarizerMs !== undefined) metrics.summarizerDuration.observe(c.summarizerMs / 1000);
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

function seconds(ms: number): string {
  return ms >= 1000 ? `${(ms / 1000).toFixed(1)} s` : `${Math.round(ms)} ms`;
}
