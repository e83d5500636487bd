import type { Dialect } from '../../src/dialects/types.js';

/*
 * What a compaction should keep, read off the items it replaced, and whether the compacted
 * request still says it. The eval's own reading, on purpose: it must not share a blind spot with
 * the gateway's ledger. Every probe is a piece of text that must appear verbatim in some string
 * value of the compacted request (decoded, so JSON escaping does not matter).
 */

export const CATEGORIES = ['paths', 'commands', 'identifiers', 'errors', 'constraints'] as const;
export type Category = (typeof CATEGORIES)[number];
export type Probes = Record<Category, string[]>;

/** Probes longer than this are cut: a ledger line quotes a command or an error, not a whole heredoc. */
const PROBE_MAX_CHARS = 120;
/** The mark every summary the gateway writes starts with. */
const SUMMARY_MARK = '[compaction-gateway]';
const PATH_KEY = /^(?:path|paths|file|files|filename|file_?path|notebook_path)$/i;
const COMMAND_KEY = /^(?:command|cmd)$/;
/** Tool arguments longer than this are content (a file being written), not names. */
const SHORT_ARG_CHARS = 200;
const SOURCE_EXTENSION = /\.(?:[cm]?[jt]sx?|json|md|ya?ml|toml|lock|txt|sh|py|go|rs|css|html|sql|env)$/i;
const IDENTIFIER = /[A-Za-z_][A-Za-z0-9_]{3,}/g;
const CONSTRAINT = /\b(?:don'?t|do not|never|must|always|only|keep|avoid|instead of)\b|,\s*not\b/i;
/** Lines that open an error report: runtime exceptions, compilers, test runners, shells. */
const ERROR_LINES: RegExp[] = [
  /^\w*(?:Error|Exception)(?::|\s\[|$)/,
  /^error\b/i,
  /^FAIL\b/,
  /^(?:fatal|panic):/,
  /^npm ERR!/,
  /^Traceback \(most recent call last\)/,
  /: error TS\d+:/,
  /:\d+:\d+:?\s+error\b/,
  /\bcommand not found\b/,
];
/** A tool result is read this far for its error line. */
const ERROR_SCAN_LINES = 400;

/** Every string value of a JSON value; a string that is itself JSON (tool arguments) adds its values too. */
export function stringLeaves(value: unknown, out: string[] = []): string[] {
  if (typeof value === 'string') {
    out.push(value);
    const nested = nestedJson(value);
    if (nested !== undefined) stringLeaves(nested, out);
  } else if (Array.isArray(value)) {
    for (const v of value) stringLeaves(v, out);
  } else if (typeof value === 'object' && value !== null) {
    for (const v of Object.values(value)) stringLeaves(v, out);
  }
  return out;
}

function nestedJson(text: string): unknown {
  const first = text.trimStart()[0];
  if (first !== '{' && first !== '[') return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/**
 * The items of the original conversation the compaction replaced. An item counts as kept when its
 * readable content (the dialect's rendering: its text and its tool calls) still appears outside
 * the summary, so that a kept turn merged with the summary (Messages, Gemini), stripped of its
 * signed thinking or of a cache breakpoint is not taken for condensed; a tool output masked or cut
 * is, since its text went.
 */
export function condensedItems(dialect: Dialect, original: readonly unknown[], compactedRequest: Record<string, unknown>): unknown[] {
  const compacted = dialect.read(compactedRequest)?.items ?? [];
  const exact = new Set(compacted.map((item) => JSON.stringify(item)));
  const summaries = stringLeaves(compactedRequest).filter((s) => s.startsWith(SUMMARY_MARK));
  const rendered = compacted.map((item) => dialect.render(item));
  const texts = rendered.map((r) => summaries.reduce((text, s) => text.split(s).join(''), r.text)).join('\u0000');
  const calls = new Set(rendered.flatMap((r) => r.calls.map(callKey)));
  return original.filter((item) => {
    if (exact.has(JSON.stringify(item))) return false;
    const r = dialect.render(item);
    if (r.text === '' && r.calls.length === 0) return true;
    return !((r.text === '' || texts.includes(r.text)) && r.calls.every((c) => calls.has(callKey(c))));
  });
}

function callKey(call: { id: string; name: string; args: string }): string {
  return `${call.id}\u0000${call.name}\u0000${call.args}`;
}

/** The probes of some items, each category without repeats, in the order met. */
export function probesOf(dialect: Dialect, items: readonly unknown[]): Probes {
  const found = Object.fromEntries(CATEGORIES.map((c) => [c, new Set<string>()])) as Record<Category, Set<string>>;
  const add = (category: Category, texts: Iterable<string>) => {
    for (const t of texts) if (t !== '') found[category].add(t);
  };
  for (const item of items) {
    const role = dialect.describe(item).role;
    const { text, calls } = dialect.render(item);
    for (const call of calls) {
      const args = argsObject(call.args);
      const command = commandOf(args);
      add('paths', [...pathArgs(args), ...(command ? pathsInCommand(command) : [])]);
      if (command) add('commands', [clip(firstLine(command))]);
      add('identifiers', shortValues(args).flatMap(identifiersIn));
    }
    if (role === 'assistant') add('identifiers', identifiersIn(text));
    if (role === 'tool')
      add(
        'errors',
        [errorLine(text)].filter((l): l is string => l !== undefined),
      );
    if (role === 'user') add('constraints', constraintsIn(text));
  }
  return Object.fromEntries(CATEGORIES.map((c) => [c, [...found[c]]])) as Probes;
}

export interface CategoryScore {
  total: number;
  kept: number;
  missed: string[];
}
export type Score = Record<Category, CategoryScore>;

/** Which probes the compacted request still carries, verbatim in one of its string values. */
export function scoreProbes(probes: Probes, compactedRequest: Record<string, unknown>): Score {
  const haystack = stringLeaves(compactedRequest).join('\u0000');
  const score = (list: string[]): CategoryScore => {
    const missed = list.filter((p) => !haystack.includes(p));
    return { total: list.length, kept: list.length - missed.length, missed };
  };
  return Object.fromEntries(CATEGORIES.map((c) => [c, score(probes[c])])) as Score;
}

/** UTF-8 bytes of the text the compaction wrote: string values of the compacted request the original did not have (summary, placeholders). */
export function writtenBytes(original: Record<string, unknown>, compacted: Record<string, unknown>): number {
  const before = new Set(stringLeaves(original));
  return stringLeaves(compacted)
    .filter((s) => !before.has(s))
    .reduce((sum, s) => sum + Buffer.byteLength(s), 0);
}

// ---------------------------------------------------------------------------------------------
// Reading tool calls and texts

function argsObject(args: string): Record<string, unknown> {
  const parsed = nestedJson(args);
  return typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed) ? (parsed as Record<string, unknown>) : {};
}

function stringsOf(value: unknown): string[] {
  const list = Array.isArray(value) ? value : [value];
  return list
    .filter((v): v is string => typeof v === 'string')
    .map((v) => v.trim())
    .filter((v) => v !== '' && !v.includes('\n'));
}

function pathArgs(args: Record<string, unknown>): string[] {
  return Object.entries(args).flatMap(([key, value]) => (PATH_KEY.test(key) ? stringsOf(value) : []));
}

/** A shell command (`command` or `cmd`, a string or an argv list); an editor's `command: "str_replace"` beside a path is not one. */
function commandOf(args: Record<string, unknown>): string | undefined {
  if (Object.keys(args).some((k) => PATH_KEY.test(k))) return undefined;
  for (const [key, value] of Object.entries(args)) {
    if (!COMMAND_KEY.test(key)) continue;
    const text = Array.isArray(value) ? value.filter((v) => typeof v === 'string').join(' ') : value;
    if (typeof text === 'string' && text.trim() !== '') return text.trim();
  }
  return undefined;
}

/** Words of a command that name files: `cat src/x.ts` names src/x.ts; flags, globs, URLs and redirections do not. */
function pathsInCommand(command: string): string[] {
  return firstLine(command)
    .split(/\s+/)
    .map((w) => w.replace(/^['"]|['"]$/g, ''))
    .filter((w) => isPathLike(w) && !w.startsWith('-') && !/[|&;<>$`*?(){}=]/.test(w) && !w.includes('://'));
}

function isPathLike(word: string): boolean {
  return (word.includes('/') && /[A-Za-z]/.test(word)) || SOURCE_EXTENSION.test(word);
}

function shortValues(args: Record<string, unknown>): string[] {
  return Object.entries(args)
    .filter(([key]) => !PATH_KEY.test(key))
    .flatMap(([, value]) => (Array.isArray(value) ? value : [value]))
    .filter((v): v is string => typeof v === 'string' && v.length <= SHORT_ARG_CHARS);
}

/** CamelCase and snake_case names; words that are paths are left to the paths, flags (`--noEmit`) to the commands. */
function identifiersIn(text: string): string[] {
  const words = text.split(/\s+/).filter((w) => !w.startsWith('-') && !isPathLike(w.replace(/[`'",.:;()]+$/g, '')));
  return words
    .flatMap((w) => w.match(IDENTIFIER) ?? [])
    .filter((name) => /[a-z][A-Z]|[A-Z]{2}[a-z]/.test(name) || /[A-Za-z0-9]_[A-Za-z0-9]/.test(name));
}

/** The first line of a tool result that opens an error report, if it has one. */
function errorLine(text: string): string | undefined {
  const lines = text.split('\n', ERROR_SCAN_LINES).map((l) => l.trim());
  const line = lines.find((l) => ERROR_LINES.some((re) => re.test(l)));
  return line === undefined ? undefined : clip(line);
}

/** The user's sentences that constrain the work: don't, never, must, always, only, keep... */
function constraintsIn(text: string): string[] {
  return text
    .split(/(?<=[.!?])\s+|\n+/)
    .map((s) => s.trim())
    .filter((s) => s !== '' && !s.startsWith('<') && CONSTRAINT.test(s))
    .map(clip);
}

function firstLine(text: string): string {
  return text.split('\n', 1)[0].trim();
}

function clip(text: string): string {
  return text.length > PROBE_MAX_CHARS ? text.slice(0, PROBE_MAX_CHARS) : text;
}
