import { agentConversation, bigAgentConversation } from '../test/compaction/conversations.js';

/** Headers the OpenAI SDK sends with every call: a realistic amount of header work for a proxy. */
export const SDK_HEADERS: Record<string, string> = {
  accept: 'application/json',
  'content-type': 'application/json',
  authorization: 'Bearer sk-bench-not-a-real-key-0123456789abcdefghijklmnopqrstuvwxyz',
  'user-agent': 'OpenAI/JS 6.49.0',
  'x-stainless-lang': 'js',
  'x-stainless-package-version': '6.49.0',
  'x-stainless-os': 'Linux',
  'x-stainless-arch': 'x64',
  'x-stainless-runtime': 'node',
  'x-stainless-runtime-version': 'v20.20.2',
  'x-stainless-retry-count': '0',
  'x-stainless-timeout': '600',
  'accept-encoding': 'gzip, deflate',
};

export const CHAT_PATH = '/v1/chat/completions';

/**
 * What the independent harness (../shared/peer-bench, copied where it runs) sends: two headers and
 * a 191-byte body. The `bare` scenario sends exactly this, so its ratios can be set beside that
 * harness's; the other scenarios send what an agent sends.
 */
export const BARE_HEADERS: Record<string, string> = { 'content-type': 'application/json', authorization: 'Bearer sk-bench-0000' };
export const BARE_MODEL = 'gpt-4o-mini';

export function bareChatBody(): string {
  return JSON.stringify({
    model: BARE_MODEL,
    messages: [
      { role: 'system', content: 'You are a helpful assistant.' },
      { role: 'user', content: 'Say hello in one short sentence.' },
    ],
    temperature: 0.2,
    max_tokens: 256,
  });
}

/** A small chat request, the common case: a system prompt and one question (~300 bytes). */
export function smallChatBody(): string {
  return JSON.stringify({
    model: 'fake-model',
    messages: [
      { role: 'system', content: 'You are a helpful assistant. Answer briefly and cite the files you used.' },
      { role: 'user', content: 'Why does the replay test fail when the upstream answers 413 before reading the body? Show the fix.' },
    ],
    temperature: 0.2,
    max_tokens: 256,
  });
}

/** A streamed small request. `"stream":true` comes first so the fake upstream spots it cheaply. */
export function streamChatBody(): string {
  const { model, messages, temperature, max_tokens } = JSON.parse(smallChatBody());
  return JSON.stringify({ stream: true, model, messages, temperature, max_tokens, stream_options: { include_usage: true } });
}

/** An agent request of at least `bytes` bytes: tool calls, tool outputs, non-ASCII text. */
export function agentChatBody(bytes: number, seed = 3): string {
  for (let turns = 10; turns < 10_000; turns += 2) {
    const body = JSON.stringify({
      model: 'fake-model',
      messages: agentConversation({ turns, toolOutputBytes: 4800, seed }),
      max_tokens: 1024,
    });
    if (Buffer.byteLength(body) >= bytes) return body;
  }
  throw new Error(`could not build a ${bytes}-byte request`);
}

/** A request of `bytes` bytes whose user message is one string: a pasted file, a base64 image. */
export function oneStringChatBody(bytes: number, model = 'fake-model'): string {
  const shell = {
    model,
    messages: [
      { role: 'system', content: 'You are a helpful assistant.' },
      { role: 'user', content: '' },
    ],
    temperature: 0.2,
    max_tokens: 256,
  };
  const filler = 'Summarize the following log excerpt and list the three most important anomalies with their timestamps. ';
  const room = Math.max(1, bytes - Buffer.byteLength(JSON.stringify(shell)));
  shell.messages[1].content = filler.repeat(Math.ceil(room / filler.length)).slice(0, room);
  return JSON.stringify(shell);
}

/** The rescue path's input: the ~7 MB, ~2,000-message agent conversation of the compaction tests. */
export function bigAgentRequest(seed = 7): Record<string, unknown> {
  return { model: 'fake-model', messages: bigAgentConversation(seed), max_tokens: 1024, temperature: 0.2 };
}
