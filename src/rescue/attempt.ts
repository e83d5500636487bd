import { callUpstream } from '../upstream/client.js';
import { inspect, type InspectedAnswer } from '../upstream/inspect.js';
import type { RescueContext } from './context.js';

/**
 * Sends one attempt upstream and reads just enough of the answer to judge it; for a request the
 * gateway rewrote (`rewritten`), in an API whose answers say what they dropped of the input, a JSON
 * answer whole.
 */
export async function attempt(
  ctx: RescueContext,
  body: Buffer | readonly Buffer[],
  headers: Record<string, string | string[]>,
  rewritten = false,
): Promise<InspectedAnswer> {
  const { deps } = ctx;
  const answer = await callUpstream(deps.dispatcher, {
    target: ctx.upstream.target,
    path: ctx.path,
    method: 'POST',
    headers,
    body,
    signal: ctx.gone,
  });
  ctx.notes.upstreamStatus = answer.status;
  ctx.notes.upstreamTtfbMs = answer.ttfbMs;
  ctx.notes.streamed = String(answer.headers['content-type'] ?? '').includes('text/event-stream');
  deps.metrics.upstreamTtfb.observe(ctx.notes.route ?? ctx.dialect.api, answer.ttfbMs / 1000, ctx.upstream.name);
  const whole = rewritten && ctx.dialect.droppedState !== null;
  return inspect(answer, deps.config.upstream, ctx.dialect.streamEvent, whole);
}
