import { readFileSync } from 'node:fs';
import { expect } from 'vitest';
import type { Received } from './fake-upstream.js';
import { startGateway } from './gateway.js';
import { report, type BoundSession, type LimitStyle, type SessionReport, type TurnResult } from './session-replay.js';
import { parseCompactionHeader } from './rescue.js';
import type { BindingCheck, StrictAnthropic } from './strict-anthropic.js';
import type { GeminiCheck, StrictGemini } from './strict-gemini.js';
import type { ReasoningCheck, StrictResponses } from './strict-responses.js';
import { startStandIn } from './provider.js';

/*
 * A recorded agent session replayed through the gateway against a strict stand-in, its provider
 * state re-signed turn by turn. The recorded bodies carry placeholder signatures (Claude Code's
 * thinking blocks, Gemini CLI's thought signatures) or no reasoning at all (Codex), so before turn
 * i goes out each earlier answer's state is put back as the stand-in issued it, which is what the
 * agent does: it returns every item it got. The stand-in answers each turn with the recorded next step (the same text, the same tool
 * call id, name and input), so the recorded tool results still answer it and every other recorded
 * byte stays as it was.
 */

const root = new URL('../fixtures/agent-sessions/', import.meta.url);
const fixture = (file: string) => readFileSync(new URL(file, root), 'utf8');
const TURNS = 13;
const FINAL_ANSWER = 'ALL DONE';
/** How the stand-ins refuse a body for its size, in every style; any other refusal is about bound state. */
export const OVERFLOW =
  /prompt is too long|Too Large|exceeds the maximum allowed number of bytes|exceeds the context window|exceeds the maximum number of tokens allowed/;

type Check = BindingCheck | ReasoningCheck | GeminiCheck;
type Standin = StrictAnthropic | StrictResponses | StrictGemini;

export interface BoundTurn extends TurnResult {
  /** The answer reached its last event (message_stop, response.completed, a finishReason). */
  finished: boolean;
  /** What the stand-in made of each call of the turn, summarizer calls excluded. */
  checks: Check[];
  /** Provider state (signatures, reasoning ids) in the body the agent sent, and in the turn's last call. */
  stateSent: string[];
  stateKept: string[];
  /** The last call's items up to and including the summary or its last masked output (the compacted prefix), or null. */
  prefix: string | null;
  /** Tool outputs the last call carries masked (placeholders the gateway put in). */
  masked: number;
  /** What the agent got back: content blocks, output items, or a model turn's parts. */
  answer: any[];
}

export interface BoundRun {
  session: BoundSession;
  report: SessionReport;
  turns: BoundTurn[];
  /** Each turn's body as the agent sent it, re-signed. */
  bodies: any[];
  /** The turn (1-based) whose answer issued each piece of state. */
  issuedAt: Map<string, number>;
}

/** What differs between the two agents: their bodies, how their state goes back in, how they read an answer. */
interface Driver {
  path: string;
  headers: Record<string, string>;
  field: 'messages' | 'input' | 'contents';
  /** The body of turn `i` (0-based), each earlier turn's state put back from `answers` (one per turn). */
  resign(i: number, answers: any[][]): any;
  read(sse: string): { finished: boolean; answer: any[] };
  /** The state in a body, and in an answer, as the strings that identify it. */
  state(body: any): string[];
  issued(answer: any[]): string[];
  start(style: LimitStyle, limitBytes?: number): Promise<Standin>;
  /** What the gateway's upstream.url is: the stand-in's base URL, or its origin (the Gemini API). */
  upstreamUrl(standin: Standin): string;
}

const DRIVERS: Record<BoundSession, () => Driver> = { 'claude-thinking': claude, 'codex-reasoning': codex, gemini };

/**
 * The session through a gateway, the stand-in refusing anything past the size of the 8th request
 * as the agent sends it re-signed: measured first by sending the first eight turns to the stand-in
 * directly (the state's size does not depend on the run, only on the bodies). `config` is merged
 * into the gateway's (e.g. `{ compaction: { mask: false } }`).
 */
export async function runBoundSession(session: BoundSession, style: LimitStyle, config: Record<string, unknown> = {}): Promise<BoundRun> {
  const driver = DRIVERS[session]();
  const limit = (await measure(driver, 8)) - 1;
  const standin = await driver.start(style, limit);
  const gateway = await startGateway({
    upstream: { url: driver.upstreamUrl(standin) },
    summarizer: { maxInputTokens: 500_000 },
    log: { level: 'silent' },
    ...config,
  });
  try {
    const { turns, bodies, issuedAt } = await replay(driver, gateway.origin, standin, TURNS);
    return { session, report: report(session, style, limit, bodies, turns), turns, bodies, issuedAt };
  } finally {
    await gateway.close();
    await standin.close();
  }
}

async function measure(driver: Driver, nth: number): Promise<number> {
  const standin = await driver.start('window');
  try {
    const { turns } = await replay(driver, standin.origin, standin, nth);
    return turns[nth - 1].originalBytes;
  } finally {
    await standin.close();
  }
}

async function replay(driver: Driver, origin: string, standin: Standin, count: number) {
  const turns: BoundTurn[] = [];
  const bodies: any[] = [];
  const answers: any[][] = [];
  const issuedAt = new Map<string, number>();
  for (let i = 0; i < count; i++) {
    const body = driver.resign(i, answers);
    const sent = JSON.stringify(body);
    const received = standin.received.length;
    const checked = standin.checks().length;
    const res = await fetch(`${origin}${driver.path}`, { method: 'POST', headers: driver.headers, body: sent });
    const { finished, answer } = driver.read(await res.text());
    answers.push(answer);
    for (const id of driver.issued(answer)) issuedAt.set(id, i + 1);
    const seen = standin.received.slice(received);
    const isSummarizer = (r: Received) => r.headers['x-gateway-compaction'] === 'summarizer';
    const checks = standin.checks().slice(checked);
    const calls = seen
      .filter((r) => !isSummarizer(r))
      .map((r, n) => ({ bytes: r.body.length, refused: checks[n]?.refused != null, body: r.json, raw: r.body }));
    const last = calls.at(-1)?.body;
    bodies.push(body);
    turns.push({
      turn: i + 1,
      status: res.status,
      header: res.headers.get('x-gateway-compaction'),
      calls,
      summarizerCalls: seen.filter(isSummarizer).length,
      originalBytes: Buffer.byteLength(sent),
      finished,
      checks,
      stateSent: driver.state(body),
      stateKept: last ? driver.state(last) : [],
      prefix: last ? prefixOf(last[driver.field]) : null,
      masked: last ? JSON.stringify(last[driver.field] ?? []).split(MASKED).length - 1 : 0,
      answer,
    });
  }
  return { turns, bodies, issuedAt };
}

const MASKED = '[tool output omitted by compaction-gateway: ';

/** What the gateway made: up to its summary, or its last masked output. */
function prefixOf(items: unknown[] = []): string | null {
  const summary = items.findIndex((item) => JSON.stringify(item).includes('[compaction-gateway]'));
  const at = Math.max(
    summary,
    items.findLastIndex((item) => JSON.stringify(item).includes(MASKED)),
  );
  return at < 0 ? null : JSON.stringify(items.slice(0, at + 1));
}

// ---------------------------------------------------------------------------------------------
// What the runs add up to

export interface BoundFigures {
  /** The turns the gateway compacted (its header present), and per such turn: */
  compacted: number[];
  /** thinking-stripped, reasoning-dropped (the header's), and what the stand-in dropped as stale. */
  stripped: number[];
  dropped: number[];
  removed: number[];
  /** State made under the very prefix the turn was sent with, yet stripped or dropped. */
  freshLost: number[];
  /** The compacted prefix differs from the previous compacted turn's (a new or extended summary, more outputs masked). */
  newPrefix: boolean[];
  /** Refusals other than for size, as the stand-in worded them, with the turn. */
  bindingRefusals: string[];
  /** Calls carrying blocks that failed the binding without the request allowing them to be dropped. */
  invalidNotAllowed: number;
}

const headerField = (header: string | null, name: string) => Number(new RegExp(`(?:^|, )${name}=(\\d+)`).exec(header ?? '')?.[1] ?? 0);

export function boundFigures(run: BoundRun): BoundFigures {
  const compacted = run.turns.filter((t) => t.header !== null);
  const lost = (t: BoundTurn) => {
    const removed = new Set(removedOf(t));
    const kept = new Set(t.stateKept.filter((id) => !removed.has(id)));
    return t.stateSent.filter((id) => {
      const k = run.issuedAt.get(id);
      const madeUnder = k === undefined ? null : run.turns[k - 1].prefix;
      return madeUnder !== null && madeUnder === t.prefix && !kept.has(id);
    }).length;
  };
  return {
    compacted: compacted.map((t) => t.turn),
    stripped: compacted.map((t) => headerField(t.header, 'thinking-stripped')),
    dropped: compacted.map((t) => headerField(t.header, 'reasoning-dropped')),
    removed: compacted.map((t) => removedOf(t).length),
    freshLost: compacted.map(lost),
    newPrefix: compacted.map((t, n) => n === 0 || t.prefix !== compacted[n - 1].prefix),
    bindingRefusals: run.turns.flatMap((t) =>
      t.checks.filter((c) => c.refused !== null && !OVERFLOW.test(c.refused)).map((c) => `turn ${t.turn}: ${c.refused}`),
    ),
    invalidNotAllowed: run.turns.flatMap((t) => t.checks).filter((c) => 'invalid' in c && c.invalid.length > 0 && !c.dropBlock).length,
  };
}

/** What the stand-in dropped from the turn's last call: stale reasoning, or thinking under drop_block (Gemini drops nothing). */
function removedOf(t: BoundTurn): string[] {
  const check = t.checks.at(-1);
  if (!check || !('removed' in check || 'dropped' in check)) return [];
  if ('removed' in check) return check.removed;
  const items: any[] = t.calls.at(-1)!.body.messages;
  return check.dropped.map((path) => {
    const [, i, j] = path.split('.');
    return items[Number(i)].content[Number(j)].signature;
  });
}

// ---------------------------------------------------------------------------------------------
// The agents

function recordedTurns(folder: string): any[] {
  return Array.from({ length: TURNS }, (_, i) => JSON.parse(fixture(`${folder}/${String(i + 1).padStart(2, '0')}-main.json`)));
}

function recordedHeaders(folder: string, credential: Record<string, string>): { path: string; headers: Record<string, string> } {
  const { path, headers } = JSON.parse(fixture(`${folder}/headers.json`));
  const { host: _h, 'content-length': _l, connection: _c, ...rest } = headers as Record<string, string>;
  return { path, headers: { ...rest, ...credential } };
}

const events = (sse: string): any[] =>
  sse
    .split('\n')
    .filter((line) => line.startsWith('data: '))
    .map((line) => JSON.parse(line.slice(6)));

/** Claude Code: a signed thinking block opens every assistant message, then a text and a tool_use. */
function claude(): Driver {
  const recorded = recordedTurns('claude-thinking');
  // The answer to each request is the next request's newest assistant message, keyed by the tool result the request ends with.
  const steps = new Map<string | null, { text: string; toolUse: { id: string; name: string; input: unknown } }>();
  const assistants = (recorded.at(-1).messages as any[]).filter((m) => m.role === 'assistant');
  assistants.forEach((m, k) => {
    const [, text, { type: _t, ...toolUse }] = m.content;
    steps.set(k === 0 ? null : assistants[k - 1].content.at(-1).id, { text: text.text, toolUse });
  });
  const reply = (req: Received) => {
    const last = req.json.messages.at(-1);
    const result = Array.isArray(last.content) ? last.content.find((b: any) => b.type === 'tool_result') : undefined;
    return steps.get(result?.tool_use_id ?? null) ?? { text: FINAL_ANSWER };
  };
  return {
    ...recordedHeaders('claude', { 'x-api-key': 'sk-ant-session' }),
    field: 'messages',
    resign(i, answers) {
      let k = 0;
      const messages = recorded[i].messages.map((m: any) => {
        if (m.role !== 'assistant') return m;
        const block = answers[k++]?.find((b) => b.type === 'thinking');
        return block ? { ...m, content: [block, ...m.content.slice(1)] } : m;
      });
      return { ...recorded[i], messages };
    },
    read(sse) {
      const content: any[] = [];
      const json: string[] = [];
      for (const e of events(sse)) {
        if (e.type === 'content_block_start') content[e.index] = { ...e.content_block };
        if (e.type === 'content_block_delta') {
          const block = content[e.index];
          if (e.delta.type === 'thinking_delta') block.thinking += e.delta.thinking;
          if (e.delta.type === 'signature_delta') block.signature = e.delta.signature;
          if (e.delta.type === 'text_delta') block.text += e.delta.text;
          if (e.delta.type === 'input_json_delta') json[e.index] = (json[e.index] ?? '') + e.delta.partial_json;
        }
        if (e.type === 'content_block_stop' && json[e.index] !== undefined) content[e.index].input = JSON.parse(json[e.index]);
      }
      return { finished: sse.includes('event: message_stop\n'), answer: content };
    },
    state: (body) =>
      (body.messages as any[])
        .flatMap((m) => (Array.isArray(m.content) ? m.content : []))
        .filter((b: any) => b.type === 'thinking')
        .map((b: any) => b.signature),
    issued: (answer) => answer.filter((b) => b.type === 'thinking').map((b) => b.signature),
    // Claude Code sends its first request's last message (the `system` entry) as a block, to mark it
    // with cache_control, and as a string from then on: the stand-in must read the two alike or it
    // refuses Claude Code's own second turn, with no gateway in the way.
    start: (style, limitBytes) =>
      startStandIn({ provider: 'anthropic', limitBytes, style: style === '413' ? 'json_413' : 'prompt_too_long', reply }),
    upstreamUrl: (standin) => standin.baseUrl,
  };
}

/**
 * Codex: each answer a message (its preamble), a reasoning item and a function_call, sent back with
 * include: ["reasoning.encrypted_content"]. The reasoning goes back right before its call, the call
 * with the id the stand-in gave it (the API pairs a reasoning item with the item after it), and the
 * message as it came (the recorded one differs in its id and an empty `logprobs`; the reasoning is
 * bound to it).
 */
function codex(): Driver {
  const recorded = recordedTurns('codex');
  const steps = new Map<string | null, { text: string; call: { call_id: string; name: string; arguments: string } }>();
  const history = recorded.at(-1).input as any[];
  let answered: string | null = null;
  history.forEach((item, n) => {
    if (item.type !== 'message' || item.role !== 'assistant') return;
    const { call_id, name, arguments: args } = history[n + 1];
    steps.set(answered, { text: item.content[0].text, call: { call_id, name, arguments: args } });
    answered = call_id;
  });
  const reply = (req: Received) => {
    const output = (req.json.input as any[]).findLast((item) => item.type === 'function_call_output');
    return steps.get(output?.call_id ?? null) ?? { text: FINAL_ANSWER };
  };
  return {
    ...recordedHeaders('codex', { authorization: 'Bearer sk-codex-session' }),
    field: 'input',
    resign(i, answers) {
      let k = 0;
      let answer: any[] = [];
      const input = (recorded[i].input as any[]).flatMap((item) => {
        const issued = (type: string) => answer.find((o) => o.type === type);
        if (item.type === 'message' && item.role === 'assistant') {
          answer = answers[k++] ?? [];
          return [issued('message') ?? item];
        }
        if (item.type !== 'function_call' || !issued('function_call')) return [item];
        return [issued('reasoning'), { ...item, id: issued('function_call').id }].filter(Boolean);
      });
      return { ...recorded[i], input };
    },
    read(sse) {
      const all = events(sse);
      return {
        finished: sse.includes('event: response.completed\n'),
        answer: all.filter((e) => e.type === 'response.output_item.done').map((e) => e.item),
      };
    },
    state: (body) => (body.input as any[]).filter((item) => item.type === 'reasoning').map((item) => item.id),
    issued: (answer) => answer.filter((item) => item.type === 'reasoning').map((item) => item.id),
    start: (style, limitBytes) =>
      startStandIn({ provider: 'responses', limitBytes, style: style === '413' ? 'edge_413' : 'context_length', reply }),
    upstreamUrl: (standin) => standin.baseUrl,
  };
}

/**
 * Gemini CLI: each answer a model turn (a text part, then a functionCall part with its
 * thoughtSignature beside it), streamed with alt=sse, the model in the path. Before turn i, every
 * earlier model turn's call goes back with the signature the stand-in issued when it answered that
 * turn (the rest of the turn is the recorded one, which the stand-in's answer repeats), so the
 * recorded functionResponse, same id, still answers it.
 */
function gemini(): Driver {
  const recorded = recordedTurns('gemini');
  const steps = new Map<string | null, { text: string; functionCall: { id: string; name: string; args: unknown } }>();
  let answered: string | null = null;
  for (const content of recorded.at(-1).contents as any[]) {
    if (content.role !== 'model') continue;
    const text = content.parts.find((p: any) => typeof p.text === 'string').text;
    const { id, name, args } = content.parts.find((p: any) => p.functionCall).functionCall;
    steps.set(answered, { text, functionCall: { id, name, args } });
    answered = id;
  }
  const reply = (req: Received) => {
    const response = (req.json.contents.at(-1).parts as any[]).findLast((p) => p.functionResponse)?.functionResponse;
    return steps.get(response?.id ?? null) ?? { text: FINAL_ANSWER };
  };
  const { path, ...headers } = JSON.parse(fixture('gemini/headers.json')) as Record<string, string>;
  const signatures = (parts: any[]) => parts.filter((p) => typeof p.thoughtSignature === 'string').map((p) => p.thoughtSignature as string);
  return {
    path: path.replace(/^POST /, ''),
    headers: { ...headers, 'x-goog-api-key': 'AIza-gemini-session' },
    field: 'contents',
    resign(i, answers) {
      let k = 0;
      const contents = (recorded[i].contents as any[]).map((content) => {
        if (content.role !== 'model') return content;
        const issued = answers[k++]?.find((p) => p.functionCall);
        if (!issued) return content;
        return {
          ...content,
          parts: content.parts.map((p: any) => (p.functionCall ? { ...p, thoughtSignature: issued.thoughtSignature } : p)),
        };
      });
      return { ...recorded[i], contents };
    },
    read(sse) {
      const chunks = events(sse);
      const parts = chunks.flatMap((c) => c.candidates?.[0]?.content?.parts ?? []);
      return { finished: chunks.at(-1)?.candidates?.[0]?.finishReason === 'STOP', answer: parts };
    },
    state: (body) => signatures((body.contents as any[]).flatMap((c) => c.parts)),
    issued: signatures,
    start: (style, limitBytes) =>
      startStandIn({ provider: 'gemini', limitBytes, style: style === '413' ? 'edge_413' : 'invalid_argument', reply }),
    upstreamUrl: (standin) => standin.origin,
  };
}

/** The 8th request is the first over the limit, and the seven before it went upstream exactly as the agent sent them. */
export function expectSentAsIsUntilOverflow(run: BoundRun): void {
  expect(run.turns.findIndex((t) => t.originalBytes > run.report.limit) + 1, 'the first overflowing request').toBe(8);
  for (const t of run.turns.slice(0, 7)) {
    expect(t.header).toBeNull();
    expect(
      t.calls.map((c) => c.raw.toString('utf8')),
      `turn ${t.turn} sent as it was`,
    ).toEqual([JSON.stringify(run.bodies[t.turn - 1])]);
  }
}

/**
 * Every compacted turn after the first changes the prefix only with a new summary or more old
 * outputs masked, and its header says which: a summary extends a remembered summary (memory hit)
 * and reads a masked span afresh from the request (miss). `unchanged` checks a turn whose prefix held.
 */
export function expectPrefixChangesExplained(
  run: BoundRun,
  f: BoundFigures,
  unchanged?: (turn: BoundTurn, previous: BoundTurn) => void,
): void {
  const compacted = run.turns.slice(7);
  compacted.forEach((t, n) => {
    if (n === 0) return;
    const previous = compacted[n - 1];
    const summarised = t.summarizerCalls > 0;
    const maskedMore = !summarised && t.masked > previous.masked;
    expect(f.newPrefix[n], `turn ${t.turn}: the prefix changed with neither a summary nor more outputs masked`).toBe(
      summarised || maskedMore,
    );
    const header = parseCompactionHeader(t.header);
    const after = parseCompactionHeader(previous.header).strategy;
    if (summarised)
      expect(header).toMatchObject({
        strategy: 'summarize',
        memory: after === 'mask' ? 'miss' : 'hit',
        'summarizer-ms': expect.any(Number),
      });
    else if (maskedMore) expect(header).toMatchObject({ strategy: 'mask', memory: 'hit' });
    else unchanged?.(t, previous);
  });
}

/**
 * The limits and configurations a bound session is replayed under: masking (the default) and,
 * with it off, the summary path alone; each behind an edge 413 and a stated window.
 */
export const BOUND_VARIANTS: Array<[LimitStyle, string, Record<string, unknown>, 'mask' | 'summarize']> = [
  ['413', 'masking (the default)', {}, 'mask'],
  ['window', 'masking (the default)', {}, 'mask'],
  ['413', 'masking off', { compaction: { mask: false } }, 'summarize'],
  ['window', 'masking off', { compaction: { mask: false } }, 'summarize'],
];
