import type { Rendered } from '../dialects/types.js';
import { jsonBytes } from './size.js';

/*
 * What any summary of a coding agent's history loses first, read off the items without understanding
 * them; agents' own compaction asks for the same (Claude Code's /compact: "Files and Code Sections",
 * "Errors and fixes", "All user messages"). Labelled lists of verbatim facts, never prose: it reads the
 * same in any language, and the same items give the same bytes.
 */

/** Oldest first, each once. JSON-safe: the memory keeps it with the summary. */
export interface Trail {
  changed: string[];
  read: string[];
  commands: string[];
  errors: string[];
  said: string[];
}

export interface TrailItem {
  rendered: Rendered;
  answers: readonly string[];
}

const SAID_VERBATIM_CHARS = 300;
const LINE_MAX_CHARS = 200;
const PATH_MAX_CHARS = 300;
const COMMAND_MAX_CHARS = 300;
const KEEP_PER_LIST = 200;
const ARGUMENTS_PARSED_MAX_CHARS = 100_000;
const RESULT_SCANNED_CHARS = 20_000;

const PATH_KEY = /^(path|paths|file|files|file_?path|filepath|filename|dir|directory|target_file|absolute_path|notebook_path)$/i;
const CHANGES = /write|edit|patch|replace|create|insert|delete|remove|move|rename|apply|save|update|mkdir/i;
const SHELL = /bash|shell|exec|command|terminal|run|sh$/i;
const COMMAND_KEY = /^(command|cmd|script)$/i;
const EXIT_STATUS = [
  /\bexit(?:ed with)?[ _]?(?:code|status)\b["']?\s*[:=]?\s*(-?\d{1,3})\b/i,
  /\bprocess exited with (?:code )?(-?\d{1,3})\b/i,
  /"exit_code"\s*:\s*(-?\d{1,3})\b/,
];
const ERROR_LINE =
  /^(?:\w*(?:Error|Exception)\b[:\s]|error(?:\[\w+\])?(?: TS\d+)?:|fatal:|panic:|Traceback \(most recent call last\)|FAIL\b|E\s{2,}|npm ERR!|[^:\s]+:\d+(?::\d+)?:? error\b|.*\berror TS\d+:)/;
const PATCH_FILE = /^\*\*\* (?:Add|Update|Delete) File: (.+)$/gm;
const PATCH_MOVE = /^\*\*\* Move to: (.+)$/gm;
const REMINDER_OPEN = '<system-reminder>';
const REMINDER_CLOSE = '</system-reminder>';
/** A reminder can be long; the person's words are short. */
const SAID_SCANNED_CHARS = 64 * 1024;

export function emptyTrail(): Trail {
  return { changed: [], read: [], commands: [], errors: [], said: [] };
}

export function trailOf(items: readonly TrailItem[], earlier?: Trail): Trail {
  const start = earlier ? copy(earlier) : emptyTrail();
  const trail = {
    changed: new Facts(start.changed),
    read: new Facts(start.read),
    commands: new Facts(start.commands),
    errors: new Facts(start.errors),
    said: new Facts(start.said),
  };
  const calls = new Map<string, { name: string; command?: string }>();
  for (const { rendered, answers } of items) {
    if (isPerson(rendered.who)) trail.said.add(said(rendered.text));
    for (const call of rendered.calls) {
      const args = parsedArgs(call.args);
      const command = commandOf(call.name, args);
      if (command) trail.commands.add(command);
      for (const path of pathsOf(call.name, call.args, args)) (CHANGES.test(call.name) ? trail.changed : trail.read).add(path);
      calls.set(call.id, { name: call.name, command });
    }
    // An item answering several calls has one text for all: no status or error is read off it.
    for (const id of answers.length === 1 ? answers : []) {
      const call = calls.get(id);
      const result = rendered.text.slice(0, RESULT_SCANNED_CHARS);
      const status = exitStatus(result);
      if (call?.command && status !== undefined) trail.commands.replace(call.command, `${call.command} → exit ${status}`);
      // A file's contents mention errors all the time: only what other tools answered counts.
      const error = call && !isReading(call.name) ? errorLine(result) : undefined;
      if (error) trail.errors.add(error);
    }
  }
  const changed = trail.changed.list();
  // A path read and then changed is listed once, as changed.
  const changedSet = new Set(changed);
  const newest = (list: string[]) => list.slice(Math.max(0, list.length - KEEP_PER_LIST));
  return {
    changed: newest(changed),
    read: newest(trail.read.list().filter((p) => !changedSet.has(p))),
    commands: newest(trail.commands.list()),
    errors: newest(trail.errors.list()),
    said: newest(trail.said.list()),
  };
}

export function resultLine(call: { name: string; args: string } | undefined, result: string): string {
  if (!call) return '';
  const args = parsedArgs(call.args);
  const command = commandOf(call.name, args);
  const status = exitStatus(result.slice(0, RESULT_SCANNED_CHARS));
  const error = isReading(call.name) ? undefined : errorLine(result.slice(0, RESULT_SCANNED_CHARS));
  const what = command ?? pathsOf(call.name, call.args, args).join(', ');
  return [what && clip(what, COMMAND_MAX_CHARS), status !== undefined ? `exit ${status}` : '', error ?? ''].filter(Boolean).join('; ');
}

/** `maxBytes` as JSON-escaped. */
export function trailText(trail: Trail, maxBytes: number): string {
  const sections: Array<[string, string[], string]> = [
    ['files changed', trail.changed, ', '],
    ['commands', trail.commands.map((c) => `\`${c}\``), '; '],
    ['errors', trail.errors, ' | '],
    ['files read', trail.read, ', '],
    ['user said', trail.said.map((s) => JSON.stringify(s)), '; '],
  ];
  const title = '[trail of the condensed messages, read off them by the gateway]';
  const present = sections.filter(([, list]) => list.length > 0);
  if (present.length === 0 || escaped(title) > maxBytes) return '';
  const lines = present.map(([label, list, sep]) => ({ prefix: `\n${label}: `, list, sep }));
  const rooms = fairShares(
    lines.map((l) => escaped(l.prefix + l.list.join(l.sep))),
    maxBytes - escaped(title),
  );
  return title + lines.map((l, k) => boundedList(l.prefix, l.list, l.sep, rooms[k])).join('');
}

/** A short list never costs a long one its room. */
function fairShares(needs: number[], room: number): number[] {
  const rooms = needs.map(() => 0);
  let left = room;
  const order = needs.map((need, k) => ({ need, k })).sort((a, b) => a.need - b.need || a.k - b.k);
  order.forEach(({ need, k }, i) => {
    rooms[k] = Math.max(0, Math.min(need, Math.floor(left / (order.length - i))));
    left -= rooms[k];
  });
  return rooms;
}

function boundedList(prefix: string, list: string[], sep: string, room: number): string {
  const whole = `${prefix}${list.join(sep)}`;
  if (escaped(whole) <= room) return whole;
  let shown = 0;
  let bytes = escaped(prefix);
  for (let i = list.length - 1; i >= 0; i--) {
    const earlier = i === 0 ? '' : `(${i} earlier)${sep}`;
    const cost = escaped(list[i]) + (shown > 0 ? escaped(sep) : 0);
    if (bytes + cost + escaped(earlier) > room) break;
    bytes += cost;
    shown++;
  }
  if (shown === 0) return '';
  const left = list.length - shown;
  return `${prefix}${left > 0 ? `(${left} earlier)${sep}` : ''}${list.slice(left).join(sep)}`;
}

function isPerson(who: string): boolean {
  // A dialect may add the sender's name: chat renders `name: "alice"` as "user (alice)".
  return who === 'user' || who.startsWith('user (');
}

function isReading(name: string): boolean {
  return !CHANGES.test(name) && !SHELL.test(name);
}

function said(text: string): string | undefined {
  const plain = withoutReminders(text.slice(0, SAID_SCANNED_CHARS)).trim();
  if (!plain || plain.startsWith('[compaction-gateway]')) return undefined;
  if (plain.length <= SAID_VERBATIM_CHARS) return plain;
  const line =
    plain
      .split('\n')
      .map((l) => l.trim())
      .find(Boolean) ?? '';
  return `${clip(line, LINE_MAX_CHARS)}`;
}

/** An unclosed `<system-reminder>` runs to the end; linear. */
function withoutReminders(text: string): string {
  let out = '';
  let at = 0;
  for (;;) {
    const open = text.indexOf(REMINDER_OPEN, at);
    if (open < 0) return out + text.slice(at);
    out += text.slice(at, open);
    const close = text.indexOf(REMINDER_CLOSE, open + REMINDER_OPEN.length);
    if (close < 0) return out;
    at = close + REMINDER_CLOSE.length;
  }
}

function parsedArgs(args: string): Record<string, unknown> | undefined {
  if (args.length > ARGUMENTS_PARSED_MAX_CHARS) return undefined;
  try {
    const parsed: unknown = JSON.parse(args);
    return typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed) ? (parsed as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

function commandOf(name: string, args: Record<string, unknown> | undefined): string | undefined {
  if (!args || !SHELL.test(name)) return undefined;
  for (const [key, value] of Object.entries(args)) {
    if (!COMMAND_KEY.test(key)) continue;
    const line =
      typeof value === 'string' ? value : Array.isArray(value) && value.every((v) => typeof v === 'string') ? argvLine(value) : undefined;
    if (line?.trim()) return clip(line.trim().replace(/\s*\n\s*/g, ' ⏎ '), COMMAND_MAX_CHARS);
  }
  return undefined;
}

function argvLine(argv: string[]): string {
  const script = argv.findIndex((a) => a === '-c' || a === '-lc');
  return script >= 0 && script + 1 < argv.length ? argv[script + 1] : argv.join(' ');
}

function pathsOf(name: string, raw: string, args: Record<string, unknown> | undefined): string[] {
  const paths: string[] = [];
  const push = (v: unknown) => {
    if (typeof v === 'string' && v.trim() && v.length <= PATH_MAX_CHARS && !v.includes('\n')) paths.push(v.trim());
  };
  for (const [key, value] of Object.entries(args ?? {})) {
    if (PATH_KEY.test(key)) for (const v of Array.isArray(value) ? value : [value]) push(v);
  }
  if (/patch/i.test(name)) {
    const text = typeof args?.input === 'string' ? args.input : typeof args?.patch === 'string' ? args.patch : raw;
    for (const pattern of [PATCH_FILE, PATCH_MOVE]) for (const m of text.matchAll(pattern)) push(m[1]);
  }
  return paths;
}

function exitStatus(result: string): number | undefined {
  for (const pattern of EXIT_STATUS) {
    const m = pattern.exec(result);
    if (m) return Number(m[1]);
  }
  return undefined;
}

function errorLine(result: string): string | undefined {
  for (const line of result.split('\n', 400)) {
    const trimmed = line.slice(0, 1_000).trim();
    if (ERROR_LINE.test(trimmed)) return clip(trimmed, LINE_MAX_CHARS);
  }
  return undefined;
}

/** Constant time a fact (a history of 100k turns has 50k inputs: bench/findings.md). */
class Facts {
  private readonly order = new Map<string, number>();
  private next = 0;

  constructor(initial: readonly string[]) {
    for (const fact of initial) this.add(fact);
  }

  add(fact: string | undefined): void {
    if (fact && !this.order.has(fact)) this.order.set(fact, this.next++);
  }

  replace(plain: string, withStatus: string): void {
    const at = this.order.get(plain);
    this.order.delete(plain);
    if (!this.order.has(withStatus)) this.order.set(withStatus, at ?? this.next++);
  }

  list(): string[] {
    return [...this.order].sort((a, b) => a[1] - b[1]).map(([fact]) => fact);
  }
}

function copy(trail: Trail): Trail {
  const lists = (k: keyof Trail) => (Array.isArray(trail[k]) ? trail[k].filter((s) => typeof s === 'string') : []);
  return { changed: lists('changed'), read: lists('read'), commands: lists('commands'), errors: lists('errors'), said: lists('said') };
}

function clip(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max)}…` : text;
}

function escaped(text: string): number {
  return jsonBytes(text) - 2;
}
