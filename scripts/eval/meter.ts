import type { Dispatcher } from 'undici';
import type { SummarizerWire } from '../../src/dialects/types.js';
import { stringLeaves } from './probes.js';

/*
 * What the summarizer was sent and answered, seen from the dispatcher compact() is given (an
 * undici interceptor, the public way to watch a request): the same count for the stand-in and for
 * a real summarizer, whose answers we do not control.
 */

export interface MeteredCall {
  status: number;
  /** The request body as sent. */
  request: string;
  /** The answer's body, up to ANSWER_KEPT_BYTES; empty when the call failed. */
  answer: string;
}

export interface Tokens {
  input: number;
  output: number;
  /** Whether every figure came from the answers' own usage (else some are chars / 4). */
  reported: boolean;
}

export interface Meter {
  dispatcher: Dispatcher;
  /** The calls made since the last take, oldest first. */
  take(): MeteredCall[];
}

const ANSWER_KEPT_BYTES = 1024 * 1024;
const CHARS_PER_TOKEN = 4;

export function meter(dispatcher: Dispatcher): Meter {
  let calls: MeteredCall[] = [];
  const watch: Dispatcher.DispatchInterceptor = (dispatch) => (opts, handler) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let status = 0;
    const request = typeof opts.body === 'string' ? opts.body : Buffer.isBuffer(opts.body) ? opts.body.toString('utf8') : '';
    const done = (answer: string) => calls.push({ status, request, answer });
    return dispatch(opts, {
      onRequestStart: (c, context) => handler.onRequestStart?.(c, context),
      onRequestUpgrade: (c, code, headers, socket) => handler.onRequestUpgrade?.(c, code, headers, socket),
      onResponseStart: (c, code, headers, message) => {
        status = code;
        return handler.onResponseStart?.(c, code, headers, message);
      },
      onResponseData: (c, chunk) => {
        size += chunk.length;
        if (size <= ANSWER_KEPT_BYTES) chunks.push(chunk);
        return handler.onResponseData?.(c, chunk);
      },
      onResponseEnd: (c, trailers) => {
        done(Buffer.concat(chunks).toString('utf8'));
        return handler.onResponseEnd?.(c, trailers);
      },
      onResponseError: (c, err) => {
        done('');
        return handler.onResponseError?.(c, err);
      },
    });
  };
  return {
    dispatcher: dispatcher.compose(watch),
    take() {
      const taken = calls;
      calls = [];
      return taken;
    },
  };
}

/** Tokens in and out of some calls: what each answer's usage says, else its characters / 4. */
export function tokensOf(calls: readonly MeteredCall[], wire: SummarizerWire): Tokens {
  let input = 0;
  let output = 0;
  let reported = true;
  for (const call of calls) {
    const answer = parsed(call.answer);
    const usage = usageOf(answer);
    if (usage) {
      input += usage.input;
      output += usage.output;
      continue;
    }
    reported = false;
    input += Math.ceil(stringLeaves(parsed(call.request)).join('').length / CHARS_PER_TOKEN);
    output += Math.ceil((textOf(wire, answer) ?? '').length / CHARS_PER_TOKEN);
  }
  return { input, output, reported };
}

/** The usage figures of a chat, Responses, Messages or Gemini answer. */
function usageOf(answer: unknown): { input: number; output: number } | undefined {
  const a = (typeof answer === 'object' && answer !== null ? answer : {}) as Record<string, any>;
  const pairs: [unknown, unknown][] = [
    [a.usage?.prompt_tokens, a.usage?.completion_tokens],
    [a.usage?.input_tokens, a.usage?.output_tokens],
    [a.usageMetadata?.promptTokenCount, a.usageMetadata?.candidatesTokenCount],
  ];
  const found = pairs.find(([i, o]) => typeof i === 'number' && typeof o === 'number');
  return found ? { input: found[0] as number, output: found[1] as number } : undefined;
}

function textOf(wire: SummarizerWire, answer: unknown): string | undefined {
  try {
    return wire.text(answer);
  } catch {
    return undefined;
  }
}

function parsed(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
