import type { Received } from '../../test/helpers/fake-upstream.js';
import type { Scripted } from '../../test/helpers/provider.js';
import type { Api } from '../../src/dialects/types.js';

/*
 * The summarizer of the stand-in (test/helpers/provider.ts, its `summarizer` option) for the
 * evaluation: it speaks the four APIs the gateway summarizes in, and answers like a weak model: the
 * first sentence of each message of the transcript it is given, cut to what its max tokens allow
 * (4 characters a token). It never copies a tool call, and it loses every second sentence: what
 * survives a compaction with it is what the compaction itself (its ledger, its digest) carried.
 */

interface SummarizerCall {
  api: Api;
  inputChars: number;
  outputChars: number;
  maxTokens: number;
}

export interface ExtractiveSummarizer {
  /** The stand-in's answer to a summarizer call. */
  answer(req: Received): Scripted;
  calls: SummarizerCall[];
}

const SENTENCE_MAX_CHARS = 200;
/** A rendered message starts with a line naming its sender: `[user]`, `[tool result call_1]`. */
const HEADER = /^\[([^\]\n]{1,120})\]$/;
const NOTES = [/^This is part \d+ of \d+/, /^The following are summaries/];

export function extractiveSummarizer(): ExtractiveSummarizer {
  const calls: SummarizerCall[] = [];
  return { calls, answer: (req) => answer(req, calls) };
}

/** The extractive summary: who said it, and the first sentence of what they said, line by line. */
export function extractiveSummary(transcript: string, maxChars: number): string {
  const body = transcript.replace(/^<conversation>\n?/, '').replace(/\n?<\/conversation>$/, '');
  const lines = messagesOf(body)
    .map(({ who, text }) => {
      const sentence = firstSentence(text);
      return sentence && (who ? `${who}: ${sentence}` : sentence);
    })
    .filter(Boolean);
  return lines.join('\n').slice(0, Math.max(0, maxChars));
}

/** A transcript's messages by their headers; text without any (summaries being merged) line by line. */
function messagesOf(body: string): { who: string; text: string }[] {
  const lines = body.split('\n');
  if (!lines.some((l) => HEADER.test(l))) {
    return lines.filter((l) => l.trim() !== '' && !NOTES.some((n) => n.test(l))).map((text) => ({ who: '', text }));
  }
  const out: { who: string; text: string[] }[] = [];
  for (const line of lines) {
    const header = HEADER.exec(line);
    if (header) out.push({ who: header[1], text: [] });
    else if (out.length > 0 && !line.trimStart().startsWith('-> calls ')) out.at(-1)!.text.push(line);
  }
  return out.map(({ who, text }) => ({ who, text: text.join('\n') }));
}

function firstSentence(text: string): string {
  const line =
    text
      .split('\n')
      .map((l) => l.trim())
      .find((l) => l !== '') ?? '';
  const end = /[.!?](?=\s|$)/.exec(line);
  return (end ? line.slice(0, end.index + 1) : line).slice(0, SENTENCE_MAX_CHARS);
}

// ---------------------------------------------------------------------------------------------
// The four APIs

interface Asked {
  api: Api;
  transcript: string;
  maxTokens: number;
}

function answer(req: Received, calls: SummarizerCall[]): Scripted {
  const path = req.url.split('?')[0];
  if (req.json === undefined) return { status: 400, json: { error: { message: 'the body is not JSON' } } };
  const asked = askedOf(path, req.json);
  if (!asked)
    return {
      status: /(?:chat\/completions|responses|messages|:generateContent)$/.test(path) ? 400 : 404,
      json: { error: { message: `not a summarizer request: ${path}` } },
    };
  const text = extractiveSummary(asked.transcript, asked.maxTokens * 4) || '(nothing to summarize)';
  const usage = { input: Math.ceil(req.body.length / 4), output: Math.ceil(text.length / 4) };
  calls.push({ api: asked.api, inputChars: asked.transcript.length, outputChars: text.length, maxTokens: asked.maxTokens });
  return { status: 200, json: answerIn(asked.api, text, usage) };
}

/** What a summarizer call asks, read as each API's provider would: null when a required field is missing. */
function askedOf(path: string, r: Record<string, any>): Asked | null {
  const positive = (n: unknown) => (typeof n === 'number' && n > 0 ? n : undefined);
  if (path.endsWith('/chat/completions')) {
    const transcript = r.messages?.at?.(-1)?.content;
    const maxTokens = positive(r.max_tokens) ?? positive(r.max_completion_tokens);
    return typeof transcript === 'string' && maxTokens ? { api: 'chat', transcript, maxTokens } : null;
  }
  if (path.endsWith('/responses')) {
    const transcript = r.input?.[0]?.content?.[0]?.text;
    const maxTokens = positive(r.max_output_tokens);
    return typeof transcript === 'string' && maxTokens ? { api: 'responses', transcript, maxTokens } : null;
  }
  if (path.endsWith('/messages')) {
    const transcript = r.messages?.[0]?.content;
    const maxTokens = positive(r.max_tokens);
    return typeof transcript === 'string' && maxTokens && typeof r.model === 'string' ? { api: 'messages', transcript, maxTokens } : null;
  }
  if (/\/models\/[^/]+:generateContent$/.test(path)) {
    const transcript = r.contents?.[0]?.parts?.[0]?.text;
    const maxTokens = positive(r.generationConfig?.maxOutputTokens);
    return typeof transcript === 'string' && maxTokens ? { api: 'gemini', transcript, maxTokens } : null;
  }
  return null;
}

function answerIn(api: Api, text: string, usage: { input: number; output: number }): unknown {
  switch (api) {
    case 'chat':
      return {
        id: 'chatcmpl-standin',
        object: 'chat.completion',
        choices: [{ index: 0, message: { role: 'assistant', content: text }, finish_reason: 'stop' }],
        usage: { prompt_tokens: usage.input, completion_tokens: usage.output },
      };
    case 'responses':
      return {
        id: 'resp_standin',
        object: 'response',
        status: 'completed',
        output: [{ type: 'message', role: 'assistant', content: [{ type: 'output_text', text }] }],
        usage: { input_tokens: usage.input, output_tokens: usage.output },
      };
    case 'messages':
      return {
        id: 'msg_standin',
        type: 'message',
        role: 'assistant',
        content: [{ type: 'text', text }],
        stop_reason: 'end_turn',
        usage: { input_tokens: usage.input, output_tokens: usage.output },
      };
    case 'gemini':
      return {
        candidates: [{ content: { role: 'model', parts: [{ text }] }, finishReason: 'STOP' }],
        usageMetadata: { promptTokenCount: usage.input, candidatesTokenCount: usage.output },
      };
  }
}
