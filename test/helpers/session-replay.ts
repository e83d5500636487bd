import type { ServerResponse } from 'node:http';
import { completion, json, sse, startFakeUpstream, streamEvents, type FakeUpstream, type Received } from './fake-upstream.js';
import { NGINX_413 } from './nginx.js';
import { responseObject, textStream } from './strict-responses.js';
import { sessionBody, sessionTurns } from './sessions.js';

/*
 * Replays a real agent session turn by turn through a gateway, against an upstream that refuses
 * any body over a limit, and measures what the rescue did to it: what the agent would have seen,
 * what the upstream received, and how stable and faithful the compacted requests were.
 */

export type Agent = 'pi' | 'opencode' | 'codex' | 'claude' | 'pi-long';
export type LimitStyle = '413' | 'window';
/** Sessions replayed against the strict stand-ins, their provider state re-signed turn by turn (bound-session-replay.ts). */
export type BoundSession = 'claude-thinking' | 'codex-reasoning' | 'gemini';

const API_PATH: Record<Agent, string> = {
  pi: '/chat/completions',
  'pi-long': '/chat/completions',
  opencode: '/chat/completions',
  codex: '/responses',
  claude: '/messages?beta=true',
};

const ITEMS_FIELD: Record<Agent | BoundSession, string> = {
  pi: 'messages',
  'pi-long': 'messages',
  opencode: 'messages',
  codex: 'input',
  claude: 'messages',
  'claude-thinking': 'messages',
  'codex-reasoning': 'input',
  gemini: 'contents',
};

/** The requests of a session, in order. pi's long session: the 41st request cut after each tool result. */
export function turnsOf(agent: Agent): Record<string, any>[] {
  if (agent !== 'pi-long') return sessionTurns(agent);
  const last = sessionBody('pi', 'long-40-turns.json');
  const turns: Record<string, any>[] = [];
  last.messages.forEach((m: any, i: number) => {
    if (m.role === 'tool') turns.push({ ...last, messages: last.messages.slice(0, i + 1) });
  });
  return turns;
}

/** A limit that makes the session overflow first at its `nth` request (1-based). */
export function limitAt(turns: Record<string, any>[], nth: number): number {
  return Buffer.byteLength(JSON.stringify(turns[nth - 1])) - 1;
}

/** How an upstream for each API says "too long"; `window` states the limit as the provider would. */
function refuse(res: ServerResponse, agent: Agent, style: LimitStyle, bytes: number, limit: number): void {
  if (style === '413') {
    res.writeHead(413, { 'content-type': 'text/html', 'content-length': Buffer.byteLength(NGINX_413) });
    res.end(NGINX_413);
    return;
  }
  const tokens = Math.ceil(bytes / 4);
  const window = Math.floor(limit / 4);
  if (agent === 'claude') {
    return json(res, 400, {
      type: 'error',
      error: { type: 'invalid_request_error', message: `prompt is too long: ${tokens} tokens > ${window} maximum` },
    });
  }
  const message = `This model's maximum context length is ${window} tokens. However, your messages resulted in ${tokens} tokens. Please reduce the length of the messages.`;
  json(res, 400, {
    error: { message, type: 'invalid_request_error', param: agent === 'codex' ? 'input' : 'messages', code: 'context_length_exceeded' },
  });
}

/**
 * The model's answer, its usage counting the prompt as the refusals count it (4 bytes a token):
 * what a provider that read the whole request reports.
 */
function answer(res: ServerResponse, agent: Agent, body: any, bytes: number): void | Promise<void> {
  const stream = body?.stream === true;
  const prompt = Math.ceil(bytes / 4);
  if (agent === 'codex') {
    const counted = (text: string) =>
      text.replace('"input_tokens":12,', `"input_tokens":${prompt},`).replace('"total_tokens":15', `"total_tokens":${prompt + 3}`);
    if (!stream) return json(res, 200, JSON.parse(counted(JSON.stringify(responseObject('next step')))));
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.end(counted(textStream(['next', ' step']).join('')));
    return;
  }
  if (agent === 'claude') return json(res, 200, { ...anthropicMessage('next step'), usage: { input_tokens: prompt, output_tokens: 3 } });
  const usage = { prompt_tokens: prompt, completion_tokens: 2, total_tokens: prompt + 2 };
  if (!stream) return json(res, 200, { ...completion('next step'), usage });
  const events = streamEvents(['next', ' step']);
  // The usage chunk only when the request asked for it, as OpenAI sends it.
  const withUsage = body?.stream_options?.include_usage === true;
  return sse(
    res,
    events.flatMap((e) =>
      e.includes('"usage"') ? (withUsage ? [e.replace(/"usage":\{[^}]*\}/, `"usage":${JSON.stringify(usage)}`)] : []) : [e],
    ),
  );
}

function anthropicMessage(text: string) {
  return {
    id: 'msg_fake',
    type: 'message',
    role: 'assistant',
    model: 'fake-model',
    content: [{ type: 'text', text }],
    stop_reason: 'end_turn',
    stop_sequence: null,
    usage: { input_tokens: 12, output_tokens: 3 },
  };
}

/** A summarizer that keeps growing its summary with what it is given, as a real one can. */
function summarize(res: ServerResponse, req: Received): void {
  const input = req.body.toString('utf8');
  const earlier = /\[summary of the earlier conversation\]\\n([^"]{0,4000})/.exec(input)?.[1] ?? '';
  const files = [...new Set([...input.matchAll(/src\/[\w/]+\.ts/g)].map((m) => m[0]))].slice(0, 40);
  const text =
    `${earlier ? `${earlier}\\n` : ''}Task: review every TypeScript file. Files read: ${files.join(', ')}. Decision: keep going file by file.`.replace(
      /\\n/g,
      '\n',
    );
  if (req.url.startsWith('/v1/responses')) return json(res, 200, responseObject(text, 'completed', 'resp_summary'));
  if (req.url.startsWith('/v1/messages')) return json(res, 200, anthropicMessage(text));
  json(res, 200, completion(text, 'chatcmpl-summary'));
}

export interface TurnResult {
  turn: number;
  status: number;
  header: string | null;
  /** Upstream calls for this turn (summarizer calls excluded), with their sizes and answers. */
  calls: Array<{ bytes: number; refused: boolean; body: any; raw: Buffer }>;
  summarizerCalls: number;
  originalBytes: number;
}

export interface SessionReport {
  agent: Agent | BoundSession;
  style: LimitStyle;
  limit: number;
  turns: number;
  answered: number;
  upstreamCalls: number;
  rejectedBytes: number;
  overflowingTurns: number;
  summarizerCalls: number;
  summarizerPerOverflow: number;
  stablePrefixTurns: number;
  compactedTurns: number;
  cuts: number;
  lastWhole: boolean;
  maxSentOverRefused: number;
  maxSummaryChars: number;
  results: TurnResult[];
}

export async function startAgentUpstream(agent: Agent, style: LimitStyle, limit: number): Promise<FakeUpstream> {
  return startFakeUpstream((req, res) => {
    if (req.headers['x-gateway-compaction'] === 'summarizer') return summarize(res, req);
    if (req.body.length > limit) return refuse(res, agent, style, req.body.length, limit);
    return answer(res, agent, req.json, req.body.length);
  });
}

/** Sends each turn through the gateway at `baseUrl` and reports what happened. */
export async function replaySession(
  agent: Agent,
  style: LimitStyle,
  baseUrl: string,
  upstream: FakeUpstream,
  limit: number,
  headers: Record<string, string> = {},
): Promise<SessionReport> {
  const turns = turnsOf(agent);
  const results: TurnResult[] = [];
  for (let i = 0; i < turns.length; i++) {
    const before = upstream.received.length;
    const body = JSON.stringify(turns[i]);
    const res = await fetch(`${baseUrl}${API_PATH[agent]}`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        authorization: 'Bearer sk-agent',
        'x-api-key': 'sk-agent',
        'anthropic-version': '2023-06-01',
        ...headers,
      },
      body,
    });
    await res.arrayBuffer();
    const seen = upstream.received.slice(before);
    const isSummarizer = (r: Received) => r.headers['x-gateway-compaction'] === 'summarizer';
    results.push({
      turn: i + 1,
      status: res.status,
      header: res.headers.get('x-gateway-compaction'),
      calls: seen
        .filter((r) => !isSummarizer(r))
        .map((r) => ({ bytes: r.body.length, refused: r.body.length > limit, body: r.json, raw: r.body })),
      summarizerCalls: seen.filter(isSummarizer).length,
      originalBytes: Buffer.byteLength(body),
    });
  }
  return report(agent, style, limit, turns, results);
}

/** The session's figures from what each turn did; `turns` are the bodies as the agent sent them. */
export function report(
  agent: Agent | BoundSession,
  style: LimitStyle,
  limit: number,
  turns: Record<string, any>[],
  results: TurnResult[],
): SessionReport {
  const field = ITEMS_FIELD[agent];
  const overflowing = results.filter((r) => r.originalBytes > limit);
  const summarizerCalls = results.reduce((n, r) => n + r.summarizerCalls, 0);
  let stable = 0;
  let previousPrefix: string | null = null;
  let lastWhole = true;
  let maxSummaryChars = 0;
  let smallestRefused = Infinity;
  let maxSentOverRefused = 0;
  for (const r of results) {
    for (const call of r.calls) {
      // Only what the gateway made counts: the agent's own requests grow as they will.
      const made = call.bytes !== r.originalBytes;
      if (made && call.bytes >= smallestRefused) maxSentOverRefused = Math.max(maxSentOverRefused, call.bytes - smallestRefused + 1);
      if (call.refused) smallestRefused = Math.min(smallestRefused, call.bytes);
    }
    const sent = r.calls.at(-1);
    const compacted = sent && sent.bytes !== r.originalBytes ? sent : undefined;
    if (!compacted) continue;
    const items: unknown[] = compacted.body?.[field] ?? [];
    const original = turns[r.turn - 1][field] as unknown[];
    if (JSON.stringify(items.at(-1)) !== JSON.stringify(original.at(-1))) lastWhole = false;
    const summaryAt = items.findIndex((item) => JSON.stringify(item).includes('[compaction-gateway]'));
    // What the gateway made: up to its summary, or its last masked output.
    const madeEnd = items.findLastIndex((item) => /\[compaction-gateway\]|omitted by compaction-gateway/.test(JSON.stringify(item)));
    const prefix = madeEnd >= 0 ? JSON.stringify(items.slice(0, madeEnd + 1)) : null;
    if (summaryAt >= 0) maxSummaryChars = Math.max(maxSummaryChars, JSON.stringify(items[summaryAt]).length);
    if (prefix !== null && prefix === previousPrefix) stable++;
    previousPrefix = prefix;
  }
  const cuts = results.reduce((n, r) => n + Number(/cut=(\d+)/.exec(r.header ?? '')?.[1] ?? 0), 0);
  return {
    agent,
    style,
    limit,
    turns: results.length,
    answered: results.filter((r) => r.status === 200).length,
    upstreamCalls: results.reduce((n, r) => n + r.calls.length, 0),
    rejectedBytes: results.reduce((n, r) => n + r.calls.filter((c) => c.refused).reduce((m, c) => m + c.bytes, 0), 0),
    overflowingTurns: overflowing.length,
    summarizerCalls,
    summarizerPerOverflow: overflowing.length ? summarizerCalls / overflowing.length : 0,
    stablePrefixTurns: stable,
    compactedTurns: results.filter((r) => r.calls.at(-1) && r.calls.at(-1)!.bytes !== r.originalBytes).length,
    cuts,
    lastWhole,
    maxSentOverRefused,
    maxSummaryChars,
    results,
  };
}
