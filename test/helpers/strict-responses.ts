import type { ServerResponse } from 'node:http';
import { completion, json, startFakeUpstream, type FakeUpstream, type Handler, type Received } from './fake-upstream.js';
import { NGINX_413 } from './nginx.js';
import { digest, seal, unseal } from './signed.js';

/*
 * A strict stand-in for the OpenAI Responses API with encrypted reasoning: every answer starts
 * with a reasoning item whose encrypted_content is bound to the request it answered, and every
 * reasoning item sent back is checked as the API documents ("Keep the prefix unchanged"): one
 * whose earlier history (instructions, tools, earlier input items) changed is dropped silently and
 * reported in input_transformations, one that does not verify is a 400, and a reasoning item and
 * the item it was issued before travel together, with the API's exact 400s when they do not.
 */

export type StrictResponsesReject = 'context_length' | 'edge_413' | 'stream_failed';

export interface StrictResponsesOptions {
  /** Bodies larger than this are over the window. Default: no limit. */
  limitBytes?: number;
  /** How a body over limitBytes is refused. Default context_length. */
  style?: StrictResponsesReject;
  /** Every answer starts with a reasoning item. Default true. */
  reasoning?: boolean;
  /** What the model says. Default: the text 'next step'. Both text and a call: a message (a preamble,
   * as Codex shows), then the reasoning item, then the call; the reasoning bound to the message too. */
  reply?: (req: Received) => { text?: string; call?: { call_id: string; name: string; arguments: string } };
  /** How POST /v1/responses/compact answers: a window (default), or a server error (a provider without it answers 404). */
  compact?: 'window' | 'error' | 'missing';
}

export interface ReasoningCheck {
  /** The error message it answered with, if any. */
  refused: string | null;
  /** Ids of the reasoning items it dropped because their prefix changed. */
  removed: string[];
}

export interface StrictResponses extends FakeUpstream {
  responseCalls(): Received[];
  /** Calls to the summarizer, the compaction endpoint's included. */
  summarizerCalls(): Received[];
  /** Calls to POST /v1/responses/compact. */
  compactCalls(): Received[];
  /** One per non-summarizer request, in order. */
  checks(): ReasoningCheck[];
  /** The output items returned to each answered non-summarizer request; call indexes responseCalls(). */
  issued(): Array<{ call: number; items: unknown[] }>;
}

/** What encrypted_content records of its reasoning item. */
interface Binding {
  model: string;
  instructions: string;
  tools: string;
  /** The input items before it, reasoning items excluded. */
  input: string;
  id: string;
  /** The id of the output item it was issued before. */
  next: string;
}

type Transformation = { type: 'reasoning'; action: 'removed'; id: string; reason: 'prefix_changed' };

class Refusal {
  constructor(
    readonly message: string,
    readonly param: string | null,
    readonly code: string | null,
  ) {}
}

const isSummarizer = (r: Received) => r.headers['x-gateway-compaction'] === 'summarizer';
const isReasoning = (item: any) => item?.type === 'reasoning';

export interface StrictResponsesRules {
  handle: Handler;
  checks(): ReasoningCheck[];
  issued(): Array<{ call: number; items: unknown[] }>;
}

/** The Responses API's rules as a handler, for one server or a route of a shared one. */
export function strictResponsesRules(options: StrictResponsesOptions = {}): StrictResponsesRules {
  const limitBytes = options.limitBytes ?? Infinity;
  const style = options.style ?? 'context_length';
  const checks: ReasoningCheck[] = [];
  const issued: Array<{ call: number; items: unknown[] }> = [];
  /** Output item id -> the reasoning item issued right before it. */
  const after = new Map<string, string>();
  let answered = 0;
  let seen = 0;

  const handle: Handler = (req, res) => {
    const summarizer = isSummarizer(req);
    const check: ReasoningCheck = { refused: null, removed: [] };
    const call = summarizer ? -1 : seen++;
    if (!summarizer) checks.push(check);
    const refuse = (status: number, refusal: Refusal) => {
      check.refused = refusal.message;
      json(res, status, { error: { message: refusal.message, type: 'invalid_request_error', param: refusal.param, code: refusal.code } });
    };

    const over = req.body.length > limitBytes;
    if (req.url.startsWith('/v1/responses/compact')) return compactAnswer(req, res, over, after, ++answered, options.compact);
    if (over && style === 'edge_413') {
      check.refused = '413 Request Entity Too Large';
      res.writeHead(413, { 'content-type': 'text/html', 'content-length': Buffer.byteLength(NGINX_413) });
      return void res.end(NGINX_413);
    }
    const body = req.json;
    if (body === null || typeof body !== 'object')
      return refuse(400, new Refusal('We could not parse the JSON body of your request.', null, null));
    const input = inputItems(body.input);
    const bindings = verify(input, after);
    if (bindings instanceof Refusal) return refuse(400, bindings);
    const transformations = stale(body, input, bindings);
    check.removed = transformations.map((t) => t.id);
    const stream = body.stream === true;
    if (over) return tooLong(res, check, style, stream);

    const n = ++answered;
    if (summarizer) {
      const summary = `SUMMARY of ${JSON.stringify(input).length} chars: the user asked for a review of src/.`;
      if (req.url.endsWith('/chat/completions')) return json(res, 200, completion(summary, 'chatcmpl-summary'));
      return answer(res, response(body, n, [message(`msg_${n}`, summary)], transformations, req.body.length), stream);
    }
    const reply = options.reply?.(req) ?? {};
    const said = reply.text !== undefined || !reply.call ? message(`msg_${n}`, reply.text ?? 'next step') : undefined;
    const last = reply.call ? { type: 'function_call', id: `fc_${n}`, ...reply.call, status: 'completed' } : said!;
    // A preamble before the call comes first; the reasoning, bound to everything before it, goes right before the last item.
    const before = said && said !== last ? [said] : [];
    const items: unknown[] = [...before, last];
    if (options.reasoning !== false) {
      const history = [...input, ...before];
      const binding = { ...prefixOf(body, history, history.length), model: String(body.model), id: `rs_${n}`, next: last.id };
      items.splice(before.length, 0, { type: 'reasoning', id: binding.id, summary: [], encrypted_content: seal(binding) });
      after.set(last.id, binding.id);
    }
    issued.push({ call, items });
    answer(res, response(body, n, items, transformations, req.body.length), stream);
  };
  return { handle, checks: () => checks, issued: () => issued };
}

export async function startStrictResponses(options: StrictResponsesOptions = {}): Promise<StrictResponses> {
  const rules = strictResponsesRules(options);
  const upstream = await startFakeUpstream(rules.handle);
  return {
    ...upstream,
    responseCalls: () => upstream.received.filter((r) => !isSummarizer(r)),
    summarizerCalls: () => upstream.received.filter(isSummarizer),
    compactCalls: () => upstream.received.filter((r) => r.url.startsWith('/v1/responses/compact')),
    checks: rules.checks,
    issued: rules.issued,
  };
}

// ---------------------------------------------------------------------------------------------
// The binding

/** A string input is one user message. */
function inputItems(input: unknown): any[] {
  if (typeof input === 'string') return [{ role: 'user', content: input }];
  return Array.isArray(input) ? input : [];
}

function prefixOf(body: any, input: any[], k: number): Pick<Binding, 'instructions' | 'tools' | 'input'> {
  return { instructions: digest(body.instructions), tools: digest(body.tools), input: digest(expanded(input.slice(0, k))) };
}

/** What a compaction item records: the items it stands for, each by its digest. */
interface Compacted {
  kind: 'compaction';
  id: string;
  stands: string[];
}

/**
 * The history as the binding sees it: each item by its digest, reasoning left out, and a
 * compaction item the API made as the items it stands for. So a reasoning item that followed
 * the compacted items directly stays valid after the API's own compaction ("exempt"), and after
 * any other rewrite it does not.
 */
function expanded(items: any[]): string[] {
  return items
    .filter((item) => !isReasoning(item))
    .flatMap((item) => {
      const compacted = item?.type === 'compaction' ? unseal<Compacted>(item.encrypted_content) : null;
      return compacted?.kind === 'compaction' ? compacted.stands : [digest(item)];
    });
}

/** POST /v1/responses/compact: the input condensed into one encrypted compaction item. */
function compactAnswer(
  req: Received,
  res: ServerResponse,
  over: boolean,
  after: ReadonlyMap<string, string>,
  n: number,
  mode: StrictResponsesOptions['compact'],
): void {
  const fail = (status: number, message: string, code: string | null, param: string | null = null) =>
    json(res, status, { error: { message, type: status >= 500 ? 'server_error' : 'invalid_request_error', param, code } });
  if (mode === 'missing') return fail(404, 'Invalid URL (POST /v1/responses/compact)', null);
  if (mode === 'error') return fail(500, 'The server had an error while processing your request. Sorry about that!', null);
  const input = inputItems(req.json?.input);
  const bindings = verify(input, after);
  if (bindings instanceof Refusal) return fail(400, bindings.message, bindings.code, bindings.param);
  if (over) return fail(400, CONTEXT_WINDOW_MESSAGE, 'context_length_exceeded', 'input');
  const item = {
    type: 'compaction',
    id: `cmp_${n}`,
    encrypted_content: seal({ kind: 'compaction', id: `cmp_${n}`, stands: expanded(input) } satisfies Compacted),
  };
  json(res, 200, {
    id: `resp_cmp_${n}`,
    object: 'response.compaction',
    created_at: 1_700_000_000,
    output: [item],
    usage: { input_tokens: Math.ceil(req.body.length / 4), output_tokens: 50, total_tokens: Math.ceil(req.body.length / 4) + 50 },
  });
}

/**
 * Every reasoning item must verify, and must come with the item it was issued before; an item
 * issued after a reasoning item must come right after it. The first failure, in input order, is
 * the 400. Returns what each reasoning item (by position) records.
 */
function verify(input: any[], after: ReadonlyMap<string, string>): Map<number, Binding> | Refusal {
  const bindings = new Map<number, Binding>();
  for (const [k, item] of input.entries()) {
    if (item?.type === 'compaction' && unseal<Compacted>(item.encrypted_content)?.id !== item.id) {
      return new Refusal(`The encrypted content for item ${item.id} could not be verified.`, null, 'invalid_encrypted_content');
    }
    if (isReasoning(item)) {
      const binding = unseal<Binding>(item.encrypted_content);
      if (!binding || binding.id !== item.id)
        return new Refusal(`The encrypted content for item ${item.id} could not be verified.`, null, 'invalid_encrypted_content');
      if (input[k + 1]?.id !== binding.next)
        return new Refusal(`Item '${item.id}' of type 'reasoning' was provided without its required following item.`, 'input', null);
      bindings.set(k, binding);
      continue;
    }
    const required = typeof item?.id === 'string' ? after.get(item.id) : undefined;
    if (required !== undefined && !(isReasoning(input[k - 1]) && input[k - 1].id === required)) {
      return new Refusal(
        `Item '${item.id}' of type '${item.type}' was provided without its required 'reasoning' item: '${required}'.`,
        'input',
        null,
      );
    }
  }
  return bindings;
}

/** Reasoning items whose earlier history changed: the API drops them and the model re-reasons. */
function stale(body: any, input: any[], bindings: Map<number, Binding>): Transformation[] {
  const removed: Transformation[] = [];
  for (const [k, binding] of bindings) {
    const now = prefixOf(body, input, k);
    if (binding.instructions !== now.instructions || binding.tools !== now.tools || binding.input !== now.input) {
      removed.push({ type: 'reasoning', action: 'removed', id: binding.id, reason: 'prefix_changed' });
    }
  }
  return removed;
}

// ---------------------------------------------------------------------------------------------
// Wire shapes

function message(id: string, text: string) {
  return { type: 'message', id, role: 'assistant', status: 'completed', content: [{ type: 'output_text', text, annotations: [] }] };
}

function response(body: any, n: number, output: any[], transformations: Transformation[], bytes: number) {
  return {
    id: `resp_${n}`,
    object: 'response',
    created_at: 1_700_000_000,
    status: 'completed',
    model: String(body.model),
    output,
    usage: {
      input_tokens: Math.ceil(bytes / 4),
      input_tokens_details: { cached_tokens: 0 },
      output_tokens: 5,
      output_tokens_details: { reasoning_tokens: 2 },
      total_tokens: Math.ceil(bytes / 4) + 5,
    },
    error: null,
    incomplete_details: null,
    parallel_tool_calls: true,
    tool_choice: body.tool_choice ?? 'auto',
    tools: body.tools ?? [],
    input_transformations: transformations,
  };
}

type Answer = ReturnType<typeof response>;

function answer(res: ServerResponse, r: Answer, stream: boolean): void {
  if (!stream) return json(res, 200, r);
  writeEvents(res, streamOf(r));
}

/** The Responses event order: created, in_progress, each item added..done, completed. */
function streamOf(r: Answer): string[] {
  let seq = 0;
  const next = (type: string, fields: Record<string, unknown>) => event(type, fields, seq++);
  const started = { ...r, status: 'in_progress', output: [], usage: null };
  const events = [next('response.created', { response: started }), next('response.in_progress', { response: started })];
  r.output.forEach((item, output_index) => {
    if (item.type === 'message') {
      const text = item.content[0].text;
      const part = { type: 'output_text', text, annotations: [] };
      const at = { item_id: item.id, output_index, content_index: 0 };
      events.push(
        next('response.output_item.added', { output_index, item: { ...item, status: 'in_progress', content: [] } }),
        next('response.content_part.added', { ...at, part: { ...part, text: '' } }),
        next('response.output_text.delta', { ...at, delta: text, logprobs: [] }),
        next('response.output_text.done', { ...at, text, logprobs: [] }),
        next('response.content_part.done', { ...at, part }),
      );
    } else if (item.type === 'function_call') {
      events.push(
        next('response.output_item.added', { output_index, item: { ...item, arguments: '', status: 'in_progress' } }),
        next('response.function_call_arguments.delta', { item_id: item.id, output_index, delta: item.arguments }),
        next('response.function_call_arguments.done', { item_id: item.id, output_index, arguments: item.arguments }),
      );
    } else {
      events.push(next('response.output_item.added', { output_index, item: { type: item.type, id: item.id, summary: [] } }));
    }
    events.push(next('response.output_item.done', { output_index, item }));
  });
  events.push(next('response.completed', { response: r }));
  return events;
}

function tooLong(res: ServerResponse, check: ReasoningCheck, style: StrictResponsesReject, stream: boolean): void {
  check.refused = CONTEXT_WINDOW_MESSAGE;
  if (style === 'stream_failed' && stream) return writeEvents(res, failedInStream());
  json(res, 400, {
    error: { message: CONTEXT_WINDOW_MESSAGE, type: 'invalid_request_error', param: 'input', code: 'context_length_exceeded' },
  });
}

// ---------------------------------------------------------------------------------------------
// Wire pieces for scripted answers (`script(...)` of the stand-in) and other fakes

export const CONTEXT_WINDOW_MESSAGE = 'Your input exceeds the context window of this model. Please adjust your input and try again.';

/** A whole Response object, its output one text message when completed. */
export function responseObject(text: string, status = 'completed', id = 'resp_fake_1') {
  return {
    id,
    object: 'response',
    created_at: 1_700_000_000,
    status,
    model: 'fake-model',
    output:
      status === 'completed'
        ? [
            {
              type: 'message',
              id: 'msg_fake_1',
              status: 'completed',
              role: 'assistant',
              content: [{ type: 'output_text', text, annotations: [] }],
            },
          ]
        : [],
    // The API reports usage once the response is done: null while it is in progress.
    usage:
      status === 'completed'
        ? {
            input_tokens: 12,
            input_tokens_details: { cached_tokens: 0 },
            output_tokens: 3,
            output_tokens_details: { reasoning_tokens: 0 },
            total_tokens: 15,
          }
        : null,
    error: null,
    incomplete_details: null,
    parallel_tool_calls: true,
    tool_choice: 'auto',
    tools: [],
  };
}

export function event(type: string, fields: Record<string, unknown>, sequence: number): string {
  return `event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: sequence, ...fields })}\n\n`;
}

/** The events before any output: what the gateway holds while it may still change its mind. */
export function preamble(id = 'resp_fake_1'): string[] {
  return [
    event('response.created', { response: responseObject('', 'in_progress', id) }, 0),
    event('response.in_progress', { response: responseObject('', 'in_progress', id) }, 1),
  ];
}

/** A whole successful stream of one text message, one text delta per piece. */
export function textStream(pieces: string[], id = 'resp_fake_1'): string[] {
  const item = { type: 'message', id: 'msg_fake_1', status: 'in_progress', role: 'assistant', content: [] };
  let n = 2;
  const text = pieces.join('');
  return [
    ...preamble(id),
    event('response.output_item.added', { output_index: 0, item }, n++),
    event(
      'response.content_part.added',
      { item_id: 'msg_fake_1', output_index: 0, content_index: 0, part: { type: 'output_text', text: '', annotations: [] } },
      n++,
    ),
    ...pieces.map((delta) =>
      event('response.output_text.delta', { item_id: 'msg_fake_1', output_index: 0, content_index: 0, delta, logprobs: [] }, n++),
    ),
    event('response.output_text.done', { item_id: 'msg_fake_1', output_index: 0, content_index: 0, text, logprobs: [] }, n++),
    event(
      'response.content_part.done',
      { item_id: 'msg_fake_1', output_index: 0, content_index: 0, part: { type: 'output_text', text, annotations: [] } },
      n++,
    ),
    event(
      'response.output_item.done',
      { output_index: 0, item: { ...item, status: 'completed', content: [{ type: 'output_text', text, annotations: [] }] } },
      n++,
    ),
    event('response.completed', { response: responseObject(text, 'completed', id) }, n++),
  ];
}

/** "Too long" as a 200 stream that fails: the preamble, then response.failed. */
function failedInStream(id = 'resp_fake_1'): string[] {
  const failed = { ...responseObject('', 'failed', id), error: { code: 'context_length_exceeded', message: CONTEXT_WINDOW_MESSAGE } };
  return [...preamble(id), event('response.failed', { response: failed }, 2)];
}

/** "Too long" as a 200 stream with an `error` event after response.created. */
export function errorEventInStream(): string[] {
  return [
    event('response.created', { response: responseObject('', 'in_progress') }, 0),
    event('error', { code: 'context_length_exceeded', message: CONTEXT_WINDOW_MESSAGE, param: 'input' }, 1),
  ];
}

function writeEvents(res: ServerResponse, events: string[]): void {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  for (const e of events) res.write(e);
  res.end();
}
