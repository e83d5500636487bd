import type { RescueContext } from './context.js';

/*
 * An agent's own compaction call (the dialect's `agentCompactions` recognise it) is the one most
 * likely to overflow, and what it carries is about to be replaced by the agent's own summary: the
 * gateway makes it fit without a summary of its own (masking, then the deterministic digest, so
 * the agent's model summarises text that is still there), and remembers nothing of it.
 */

/** Whether the request is an agent's own compaction call, by its headers, or by its parsed body when that is at hand. */
export function isAgentCompaction(
  ctx: Pick<RescueContext, 'clientHeaders' | 'dialect' | 'incoming'>,
  json: Record<string, unknown> | null = null,
): boolean {
  return ctx.dialect.agentCompactions.some((agent) => agent.is(ctx.clientHeaders, json));
}
