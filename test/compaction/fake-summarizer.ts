import type { CompactionSettings } from '../../src/compaction/index.js';
import type { Summarizer, SummarizerAnswer, SummarizerCall } from '../../src/compaction/summarizer-port.js';
import type { SizeTarget } from '../../src/compaction/size-target.js';
import type { Config } from '../../src/config/schema.js';
import type { SummarizerWire } from '../../src/dialects/types.js';

/*
 * A summarizer for compaction's own tests: a plain function in place of the network (the rescue's
 * real one, over the upstream client, is test/rescue/summarizer-client.test.ts). It records each call it
 * is sent, its body parsed, and answers as the test scripts it.
 */

export interface SentCall extends SummarizerCall {
  json: any;
  signal: AbortSignal;
}

/** What a scripted answer may be: a status (200 by default) and a JSON value, or raw text. */
export type Scripted = { status?: number; json?: unknown; text?: string };

export type FakeSummarizer = Summarizer & { calls: SentCall[] };

/** Answers each call as `answer` says; a call it does not answer (undefined) is an error of the test. */
export function fakeSummarizer(
  wire: SummarizerWire,
  answer: (call: SentCall) => Scripted | Promise<Scripted>,
  more: Partial<Summarizer> = {},
): FakeSummarizer {
  const calls: SentCall[] = [];
  return {
    wire,
    model: 'summarizer-model',
    calls,
    send: async (call, signal): Promise<SummarizerAnswer> => {
      const sent = { ...call, json: JSON.parse(call.body), signal };
      calls.push(sent);
      const a = await answer(sent);
      return { status: a.status ?? 200, text: a.text ?? JSON.stringify(a.json) };
    },
    ...more,
  };
}

/** For a compaction that must make no call (the fallback, masking, a remembered summary reused). */
export function noSummarizer(wire: SummarizerWire): FakeSummarizer {
  return fakeSummarizer(wire, (call) => {
    throw new Error(`no summarizer call was expected, got a ${call.kind} call`);
  });
}

/** A call that never answers: it ends only when its signal does, as the upstream client ends it. */
export function hanging(call: SentCall): Promise<Scripted> {
  return new Promise((_resolve, reject) => call.signal.addEventListener('abort', () => reject(call.signal.reason), { once: true }));
}

/** A chat completion's answer, with its usage. */
export function chatAnswer(content: string, usage = { prompt_tokens: 12, completion_tokens: 3, total_tokens: 15 }): Scripted {
  return {
    json: {
      id: 'chatcmpl-fake-1',
      object: 'chat.completion',
      model: 'fake-model',
      choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: 'stop' }],
      usage,
    },
  };
}

/** compact()'s settings as the rescue hands them over from the config (a deadline of `timeoutMs` from now). */
export function settingsOf(
  config: Readonly<Config>,
  target: SizeTarget,
  because = 'a test',
  onSummary?: CompactionSettings['onSummary'],
): CompactionSettings {
  const deadline = deadlineAfter(config.summarizer.timeoutMs);
  return { target, because, compaction: config.compaction, summary: config.summarizer, deadline, onSummary };
}

/** A deadline that ends after `ms`, as the rescue's does (a timer of its own; unref'd: a test need not wait for it). */
export function deadlineAfter(ms: number): AbortSignal {
  const deadline = new AbortController();
  setTimeout(() => deadline.abort(new DOMException('the summarizer did not answer in time', 'TimeoutError')), ms).unref();
  return deadline.signal;
}
