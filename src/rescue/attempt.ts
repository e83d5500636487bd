import { traceAttempt, type AttemptTrace } from '../telemetry/traces.js';
import { callUpstream } from '../upstream/client.js';
import { inspect, type InspectedAnswer } from './inspect.js';
import type { RescueContext } from './context.js';
import type { RescueRecord } from './report.js';

/**
 * Sends one attempt upstream and reads just enough of the answer to judge it; for a request the
 * gateway rewrote (`rewrite`, the rescue's record of what it did), in an API whose answers say
 * what they dropped of the input, or one whose prompt count is read (`watch`), a JSON answer whole. A traced request's attempt is a span of
 * its own, and the upstream gets that span's `traceparent`.
 */
export async function attempt(
  ctx: RescueContext,
  body: Buffer | readonly Buffer[],
  headers: Record<string, string | string[]>,
  rewrite?: RescueRecord,
  /** Its prompt count is to be read: a JSON answer is held whole (bounded). */
  watch = false,
): Promise<InspectedAnswer> {
  const { deps } = ctx;
  const rewritten = rewrite !== undefined;
  const traced = tracedAttempt(ctx, headers, rewrite);
  try {
    const answer = await callUpstream(deps.dispatcher, {
      target: ctx.upstream.target,
      path: ctx.path,
      method: 'POST',
      headers: traced?.headers ?? headers,
      body,
      signal: ctx.gone,
    });
    ctx.notes.upstreamStatus = answer.status;
    ctx.notes.upstreamTtfbMs = answer.ttfbMs;
    ctx.notes.streamed = String(answer.headers['content-type'] ?? '').includes('text/event-stream');
    deps.metrics.upstreamTtfb.observe(ctx.notes.route ?? ctx.dialect.api, answer.ttfbMs / 1000, ctx.upstream.name);
    const whole = (rewritten && ctx.dialect.droppedState !== null) || watch;
    const inspected = await inspect(answer, deps.config.upstream, ctx.dialect.streamEvent, whole);
    const { held, verdict } = inspected;
    traced?.answered({
      status: answer.status,
      headers: answer.headers,
      body: answer.body,
      held,
      overlong: verdict.overlong,
      rule: verdict.rule,
    });
    return inspected;
  } catch (err) {
    traced?.failed(err);
    throw err;
  }
}

/** The attempt's span, when the request is traced (its API, model, upstream, and what the rescue did to it). */
function tracedAttempt(
  ctx: RescueContext,
  headers: Record<string, string | string[]>,
  rewrite: RescueRecord | undefined,
): AttemptTrace | null {
  const { dialect, upstream } = ctx;
  const model = ctx.pathModel ?? ctx.notes.model;
  const compacted = rewrite?.compaction?.outcome === 'compacted';
  const what = {
    api: dialect.api,
    model,
    upstream: upstream.name,
    origin: upstream.target.origin,
    rewritten: rewrite !== undefined,
    compacted,
    usage: dialect.summarizer.usage,
  };
  return traceAttempt(what, headers);
}
