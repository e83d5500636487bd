/** JSON, JSON in `message` (LiteLLM, OpenRouter), Python reprs, SSE, NDJSON, HTML, text: bounded to a few passes over the first MBs. */
import { createParser } from 'eventsource-parser';
import { withoutEchoes } from './echo.js';
import type { StatedLimits } from './types.js';
import { tryParseJson } from '../lib/json.js';

export interface Evidence {
  /** Lower-cased values of code-like keys (code, type, status, ...), from every error object. */
  codes: string[];
  /** Request paths an error blames (`param`, or `Invalid 'x'` in the message). */
  paths: string[];
  text: string;
  /** Numbers servers report as fields rather than prose (llama.cpp). */
  fields: StatedLimits;
  /** Whether an error object / error event was seen (matters for 200 bodies and stream events). */
  carriesError: boolean;
  /** `model_context_window_exceeded` and kin, seen where no output was; an answer that stopped so after some output is an answer. */
  windowStopBeforeOutput: boolean;
}

export const MAX_SCAN_CHARS = 64 * 1024;
/** Bodies are truncated upstream at ~1 MiB; anything beyond this is not parsed. */
const MAX_PARSE_CHARS = 2 * 1024 * 1024;
/** JSON nesting walked; real error envelopes are less than 6 deep. */
const MAX_DEPTH = 16;
const MAX_NESTED_JSON = 3;
/** JSON nodes visited per body, so a huge array of objects cannot stall the relay. */
const MAX_NODES = 5000;
/** SSE events / NDJSON lines looked at; the error is always among the first ones. */
const MAX_EVENTS = 16;
const MAX_SSE_CHARS = 64 * 1024;

const TEXT_KEYS = new Set(['message', 'error', 'detail', 'details', 'msg', 'error_message', 'errormessage', 'description', 'raw', 'title']);
const CODE_KEYS = new Set(['code', 'type', 'error_type', 'errortype', 'error_code', 'errorcode', 'status', '__type', 'reason']);
const FIELD_KEYS: Readonly<Record<string, Exclude<keyof StatedLimits, 'completionCounted'>>> = {
  n_prompt_tokens: 'promptTokens',
  n_ctx: 'limitTokens',
};

// For Python reprs (`{'code': 'context_length_exceeded'}`) and truncated JSON that did not parse.
const QUOTED_CODE = /["'](?:code|type)["']\s*:\s*["']([A-Za-z0-9_.-]{1,64})["']/g;
const QUOTED_PARAM = /["']param["']\s*:\s*["']([^"'\n]{1,200})["']/g;
// OpenAI names the offending field this way: "Invalid 'tools[0].function.name': string too long".
const INVALID_PATH = /Invalid '([^'\n]{1,200})'/g;
// "The parameter `max_completion_tokens` specified in the request are not valid" (Volcengine Ark).
const NAMED_PARAMETER = /\bparameter [`'"]([A-Za-z_][\w.[\]]{0,100})[`'"]/g;
// A validation line led by its field's path: "metadata.user_id: String should have at most 256
// characters" (pydantic, Anthropic), "* GenerateContentRequest.tools[0].function_declarations[3].name: ..." (Google).
const LEADING_PATH = /(?:^|\n)[ \t*-]{0,4}([A-Za-z_]\w{0,40}(?:\.\w{1,60}|\[\d{1,6}\]){1,12}):\s/g;
const ERROR_KEY = /["'](?:error|exception)["']\s*:|["']type["']\s*:\s*["']error["']/;
const STOP_KEYS = new Set(['finish_reason', 'stop_reason', 'finishreason']);
const WINDOW_STOP = /context[ _-]?(?:window|length)|max[ _-]?context|prompt[ _-]?too[ _-]?long|input[ _-]?too[ _-]?long/i;
const OUTPUT_TOKEN_KEYS = new Set(['completion_tokens', 'output_tokens', 'candidatestokencount']);
const OUTPUT_TEXT_KEYS = new Set(['content', 'text', 'output_text', 'thinking', 'arguments', 'partial_json']);

class Collector {
  readonly codes: string[] = [];
  readonly paths: string[] = [];
  readonly fields: StatedLimits = {};
  private readonly texts: string[] = [];
  private textChars = 0;
  private nodes = 0;
  carriesError = false;
  private windowStop = false;
  private sawOutput = false;

  /** `echoes`: text the request supplied (echo.ts), cut out of every message before anything reads it. */
  constructor(private readonly echoes: readonly string[]) {}

  evidence(): Evidence {
    return {
      codes: this.codes,
      paths: this.paths,
      text: this.texts.join('\n'),
      fields: this.fields,
      carriesError: this.carriesError,
      windowStopBeforeOutput: this.windowStop && !this.sawOutput && !this.carriesError,
    };
  }

  /** `textual`: a string met here is a message (top level, or inside a `message`/`details` array). */
  walk(value: unknown, depth: number, nested: number, textual = true): void {
    if (depth > MAX_DEPTH || ++this.nodes > MAX_NODES) return;
    if (Array.isArray(value)) {
      for (let i = 0; i < value.length && this.nodes <= MAX_NODES; i++) {
        this.walk(value[i], depth + 1, nested, textual);
      }
      return;
    }
    if (typeof value === 'string') {
      if (textual) this.addText(value, nested);
      return;
    }
    if (value === null || typeof value !== 'object') return;
    const obj = value as Record<string, unknown>;
    // Only the envelope can say "this is an error": deeper objects may be tool inputs
    // or echoed content of a successful answer (`{"message": "..."}` in a tool call).
    if (depth <= 1 && nested === 0 && isErrorCarrier(obj)) this.carriesError = true;
    for (const key of Object.keys(obj)) {
      if (this.nodes > MAX_NODES) return;
      this.visitEntry(key.toLowerCase(), obj[key], depth, nested);
    }
  }

  private visitEntry(key: string, v: unknown, depth: number, nested: number): void {
    if (typeof v === 'string') {
      if (CODE_KEYS.has(key)) this.addCode(v);
      if (STOP_KEYS.has(key) && WINDOW_STOP.test(v.slice(0, 100))) {
        this.windowStop = true;
        this.addCode(v);
      }
      if (OUTPUT_TEXT_KEYS.has(key) && v !== '') this.sawOutput = true;
      if (key === 'param') this.paths.push(v.slice(0, 200));
      if (TEXT_KEYS.has(key)) this.addText(v, nested);
    } else if (typeof v === 'number') {
      if (OUTPUT_TOKEN_KEYS.has(key) && v > 0) this.sawOutput = true;
      if (CODE_KEYS.has(key)) this.addCode(String(v));
      const field = FIELD_KEYS[key];
      if (field !== undefined && Number.isSafeInteger(v) && v >= 0) this.fields[field] ??= v;
    } else if (v !== null && typeof v === 'object') {
      this.walk(v, depth + 1, nested, TEXT_KEYS.has(key));
    }
  }

  private addCode(v: string): void {
    if (v.length <= 100) this.codes.push(v.toLowerCase());
  }

  addText(text: string, nested: number): void {
    const room = MAX_SCAN_CHARS - this.textChars;
    if (room <= 0 || text.length === 0) return;
    const s = this.echoes.length > 0 ? withoutEchoes(text, this.echoes) : text;
    const piece = s.slice(0, room);
    this.texts.push(piece);
    this.textChars += piece.length + 1;
    this.scanQuoted(piece);
    if (nested < MAX_NESTED_JSON) this.parseEmbedded(s, nested + 1);
  }

  private scanQuoted(s: string): void {
    for (const m of s.matchAll(QUOTED_CODE)) this.addCode(m[1]);
    for (const m of s.matchAll(QUOTED_PARAM)) this.paths.push(m[1]);
    for (const m of s.matchAll(INVALID_PATH)) this.paths.push(m[1]);
    for (const m of s.matchAll(NAMED_PARAMETER)) this.paths.push(m[1]);
    for (const m of s.slice(0, 4096).matchAll(LEADING_PATH)) this.paths.push(m[1].replace(/^GenerateContentRequest\./, ''));
  }

  /** `ConnectionError: {"object":"error",...}` or `{"type":"error",...}. Received Model Group=...` */
  private parseEmbedded(s: string, nested: number): void {
    const start = s.search(/[[{]/);
    if (start < 0) return;
    const end = Math.max(s.lastIndexOf('}'), s.lastIndexOf(']'));
    // No length check: `s` comes from a body of at most MAX_PARSE_CHARS. JSON that starts with
    // `{` or `[` parses to an object or an array, never to a string or a number.
    if (end <= start) return;
    const parsed = tryParseJson(s.slice(start, end + 1));
    if (parsed !== undefined) this.walk(parsed, 0, nested);
  }

  addBrokenJson(s: string): void {
    if (ERROR_KEY.test(s.slice(0, MAX_SCAN_CHARS))) this.carriesError = true;
    this.addText(s, MAX_NESTED_JSON);
  }
}

function isErrorCarrier(obj: Record<string, unknown>): boolean {
  const err = obj.error;
  if (err !== undefined && err !== null && err !== false && err !== '') return true;
  if (obj.type === 'error' || obj.object === 'error') return true;
  // AWS restJson, Cohere v1, TGI and API Gateway put the text in a bare top-level `message`.
  return typeof obj.message === 'string' && !('choices' in obj) && !('delta' in obj);
}

function looksLikeJson(s: string): boolean {
  const c = s.charCodeAt(0);
  return c === 0x7b /* { */ || c === 0x5b /* [ */ || c === 0x22; /* " */
}

const SSE_FIELD = /(?:^|\n)(?:data|event):/;

/** `plainTextIsError`: a non-JSON error body is the error text; a non-JSON stream chunk counts only if it says "error". */
export function gatherEvidence(body: string, plainTextIsError: boolean, echoes: readonly string[] = []): Evidence {
  const c = new Collector(echoes);
  const trimmed = body.slice(0, MAX_PARSE_CHARS).trim();
  if (looksLikeJson(trimmed)) {
    readJsonOrLines(c, trimmed);
  } else if (SSE_FIELD.test(trimmed.slice(0, 4096))) {
    readSse(c, trimmed);
  } else {
    c.addText(trimmed, 0);
    c.carriesError = plainTextIsError || /\berror\b/i.test(trimmed.slice(0, MAX_SCAN_CHARS));
  }
  return c.evidence();
}

function readJsonOrLines(c: Collector, s: string): void {
  const parsed = tryParseJson(s);
  if (parsed !== undefined) {
    c.walk(parsed, 0, 0);
    return;
  }
  const lines = s.split('\n', MAX_EVENTS + 1).slice(0, MAX_EVENTS);
  let any = false;
  if (lines.length > 1) {
    for (const line of lines) {
      const v = tryParseJson(line.trim());
      if (v !== undefined) {
        any = true;
        c.walk(v, 0, 0);
      }
    }
  }
  if (!any) c.addBrokenJson(s);
}

/** `event: error` marks an error; each `data:` is read as JSON; a last event without its closing blank line still counts. */
function readSse(c: Collector, s: string): void {
  let events = 0;
  const parser = createParser({
    onEvent: (event) => {
      if (events++ < MAX_EVENTS) readSseEvent(c, event.event, event.data);
    },
  });
  parser.feed(s.slice(0, MAX_SSE_CHARS));
  parser.feed('\n\n');
}

function readSseEvent(c: Collector, name: string | undefined, data: string): void {
  const isError = name?.toLowerCase() === 'error';
  if (isError) c.carriesError = true;
  const payload = data.trim();
  // An empty payload falls through: it is no JSON, and addText skips an empty text.
  if (payload === '[DONE]') return;
  const parsed = looksLikeJson(payload) ? tryParseJson(payload) : undefined;
  if (parsed !== undefined) c.walk(parsed, 0, 0);
  else if (looksLikeJson(payload)) c.addBrokenJson(payload);
  else if (isError) c.addText(payload, 0);
}
