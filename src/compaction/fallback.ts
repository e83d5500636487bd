import type { Rendered } from '../dialects/types.js';
import { formatCount } from './shrink.js';
import { jsonBytes, prefixWithinBytes } from './size.js';

/*
 * The summary used when the summarizer model fails: facts that can be read off the messages
 * without understanding them. Byte sizes here are JSON-escaped sizes (`jsonBytes(text) - 2`),
 * which are never smaller than UTF-8 sizes, so a text within budget fits the summary reserve.
 */

const USER_LINE_MAX_CHARS = 200;
const TOOL_NAMES_SHOWN = 12;
const PATH_MAX_CHARS = 300;
const ARGUMENTS_PARSED_MAX_CHARS = 100_000;
const PATH_KEY = /path|file|dir/i;
const TRUNCATED = '\n[... summary truncated by compaction-gateway ...]';

interface Facts {
  messages: number;
  tokens: number;
  toolCalls: Map<string, number>;
  userLines: string[];
  paths: string[];
}

/** A deterministic digest of the condensed items, escaping to at most `maxBytes` bytes. */
export function fallbackSummaryText(middle: Rendered[], bytes: number, maxBytes: number): string {
  return clampSummaryText(render(collectFacts(middle, bytes), maxBytes), maxBytes);
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

// ---------------------------------------------------------------------------------------------
// Facts

function collectFacts(middle: Rendered[], bytes: number): Facts {
  const facts: Facts = { messages: middle.length, tokens: Math.round(bytes / 4), toolCalls: new Map(), userLines: [], paths: [] };
  const seenPaths = new Set<string>();
  for (const item of middle) {
    // A dialect may add the sender's name: chat renders `name: "alice"` as "user (alice)".
    if (item.who === 'user' || item.who.startsWith('user (')) facts.userLines.push(firstLine(item.text));
    for (const call of item.calls) {
      const name = call.name || 'unnamed';
      facts.toolCalls.set(name, (facts.toolCalls.get(name) ?? 0) + 1);
      for (const path of argumentPaths(call.args)) {
        if (!seenPaths.has(path)) facts.paths.push(path);
        seenPaths.add(path);
      }
    }
  }
  return facts;
}

function firstLine(content: string): string {
  const text = content.slice(0, 10_000);
  const line = text.split('\n').map((l) => l.trim()).find((l) => l !== '') ?? '(no text)';
  return line.length > USER_LINE_MAX_CHARS ? `${line.slice(0, USER_LINE_MAX_CHARS)}…` : line;
}

/** String values under path-like keys of the top level of a JSON arguments object. */
function argumentPaths(args: unknown): string[] {
  if (typeof args !== 'string' || args.length > ARGUMENTS_PARSED_MAX_CHARS) return [];
  let parsed: unknown;
  try {
    parsed = JSON.parse(args);
  } catch {
    return [];
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return [];
  const paths: string[] = [];
  for (const [key, value] of Object.entries(parsed as Record<string, unknown>)) {
    if (!PATH_KEY.test(key)) continue;
    for (const v of Array.isArray(value) ? value : [value]) {
      if (typeof v === 'string' && v.trim() !== '' && v.length <= PATH_MAX_CHARS && !v.includes('\n')) paths.push(v.trim());
    }
  }
  return paths;
}

// ---------------------------------------------------------------------------------------------
// Rendering, within budget

function render(facts: Facts, maxBytes: number): string {
  const header = [
    `${plural(facts.messages, 'message')} (about ${formatCount(facts.tokens)} tokens) were condensed ` +
      `without a model summary; what follows is a mechanical digest.`,
    toolCallLine(facts.toolCalls),
  ].join('\n');
  let text = header;
  const sections: [string, string[]][] = [
    ['Requests from the user, in order:', facts.userLines.map((l) => `- ${l}`)],
    ['Files and paths named in tool calls:', facts.paths.map((p) => `- ${p}`)],
  ];
  for (const [title, lines] of sections) {
    if (lines.length === 0) continue;
    const room = maxBytes - escapedBytes(`${text}\n\n${title}`);
    if (room <= 0) break;
    text += `\n\n${title}${boundedLines(lines, room)}`;
  }
  return text;
}

function toolCallLine(counts: Map<string, number>): string {
  const total = [...counts.values()].reduce((a, b) => a + b, 0);
  if (total === 0) return 'No tool calls.';
  const byUse = [...counts].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
  const shown = byUse.slice(0, TOOL_NAMES_SHOWN).map(([name, n]) => `${name} ${formatCount(n)}`);
  const more = byUse.length > TOOL_NAMES_SHOWN ? `, and ${byUse.length - TOOL_NAMES_SHOWN} more tools` : '';
  return `Tool calls: ${formatCount(total)} (${shown.join(', ')}${more}).`;
}

/** "\nline" for as many lines as fit in `room` bytes, then "\n... and N more" if some did not. */
function boundedLines(lines: string[], room: number): string {
  const moreLineBytes = escapedBytes(`\n... and ${formatCount(lines.length)} more`);
  let out = '';
  let used = 0;
  for (let i = 0; i < lines.length; i++) {
    const cost = escapedBytes(`\n${lines[i]}`);
    const reserve = i === lines.length - 1 ? 0 : moreLineBytes;
    if (used + cost + reserve > room) return `${out}\n... and ${formatCount(lines.length - i)} more`;
    out += `\n${lines[i]}`;
    used += cost;
  }
  return out;
}

function plural(n: number, noun: string): string {
  return `${formatCount(n)} ${noun}${n === 1 ? '' : 's'}`;
}

function escapedBytes(text: string): number {
  return jsonBytes(text) - 2;
}
