import type { Rendered } from '../dialects/types.js';
import { formatCount } from './shrink.js';
import { jsonBytes, prefixWithinBytes } from './size.js';

/*
 * The summary used when the summarizer model fails: what can be counted in the messages without
 * understanding them. Byte sizes here are JSON-escaped sizes (`jsonBytes(text) - 2`),
 * which are never smaller than UTF-8 sizes, so a text within budget fits the summary reserve.
 */

const TOOL_NAMES_SHOWN = 12;
const TRUNCATED = '\n[... summary truncated by compaction-gateway ...]';

/**
 * A deterministic digest of the condensed items, escaping to at most `maxBytes` bytes: how much
 * was condensed, and which tools it used. Paths, commands, errors and the person's words are in
 * the trail that every summary ends with (trail.ts).
 */
export function fallbackSummaryText(middle: Rendered[], bytes: number, maxBytes: number): string {
  return clampSummaryText(render(middle, bytes), maxBytes);
}

/** What the summary says it is, before the summary itself: the gateway's, and why it is there. */
export function summaryIntro(summarizedCount: number, because: string): string {
  const which = summarizedCount === 1 ? 'earlier message' : `${formatCount(summarizedCount)} earlier messages`;
  const verb = summarizedCount === 1 ? 'was' : 'were';
  return `[compaction-gateway] The ${which} of this conversation ${verb} condensed by the gateway because ${because}. Summary:\n\n`;
}

/** `text` cut at the end (with a marker) so that it escapes to at most `maxBytes`; for LLM summaries too. */
export function clampSummaryText(text: string, maxBytes: number): string {
  if (jsonBytes(text) - 2 <= maxBytes) return text;
  const markerBytes = jsonBytes(TRUNCATED) - 2;
  if (markerBytes > maxBytes) return text.slice(0, prefixWithinBytes(text, maxBytes));
  return text.slice(0, prefixWithinBytes(text, maxBytes - markerBytes)) + TRUNCATED;
}

function render(middle: Rendered[], bytes: number): string {
  return [
    `${plural(middle.length, 'message')} (about ${formatCount(Math.round(bytes / 4))} tokens) were condensed ` +
      `without a model summary; what follows is a mechanical digest.`,
    toolCallLine(toolCounts(middle)),
  ].join('\n');
}

/**
 * The digest of the oldest condensed items, which the summarizer's cost cap for one compaction
 * left unread (summary-pass.ts): it goes first, the model's summary of the newer items after it.
 */
export function cappedDigestText(oldest: Rendered[], bytes: number): string {
  return [
    `The oldest ${plural(oldest.length, 'message')} (about ${formatCount(Math.round(bytes / 4))} tokens) were past the ` +
      `summarizer's cost cap for one compaction and were condensed without a model summary; a mechanical digest of them:`,
    toolCallLine(toolCounts(oldest)),
    'The summary of the newer messages follows.',
  ].join('\n');
}

function toolCounts(middle: Rendered[]): Map<string, number> {
  const counts = new Map<string, number>();
  for (const item of middle)
    for (const call of item.calls) counts.set(call.name || 'unnamed', (counts.get(call.name || 'unnamed') ?? 0) + 1);
  return counts;
}

function toolCallLine(counts: Map<string, number>): string {
  const total = [...counts.values()].reduce((a, b) => a + b, 0);
  if (total === 0) return 'No tool calls.';
  const byUse = [...counts].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
  const shown = byUse.slice(0, TOOL_NAMES_SHOWN).map(([name, n]) => `${name} ${formatCount(n)}`);
  const more = byUse.length > TOOL_NAMES_SHOWN ? `, and ${byUse.length - TOOL_NAMES_SHOWN} more tools` : '';
  return `Tool calls: ${formatCount(total)} (${shown.join(', ')}${more}).`;
}

function plural(n: number, noun: string): string {
  return `${formatCount(n)} ${noun}${n === 1 ? '' : 's'}`;
}
