/**
 * npm run demo: a conversation through the gateway until the provider's window overflows, and
 * what the gateway did about it. Offline: the provider is the tests' local stand-in
 * (test/helpers/provider.ts), which counts a request's tokens as bytes / 4 and refuses what does
 * not fit as OpenAI does; no key is needed.
 */
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import OpenAI from 'openai';
import { validateConfig } from '../src/config/load.js';
import { buildServer } from '../src/server.js';
import { completion } from '../test/helpers/fake-upstream.js';
import { startStandIn } from '../test/helpers/provider.js';
import { BYTES_PER_TOKEN, tokensOf } from '../test/helpers/strict-chat.js';

const CONTEXT_TOKENS = 2_000;
const TURNS = 10;

const provider = await startStandIn({
  limitBytes: CONTEXT_TOKENS * BYTES_PER_TOKEN,
  tooLong: 'stated',
  reply: (_api, _n, req) => {
    const step = /Step (\d+)/.exec(String(req.json.messages.at(-1)?.content))?.[1] ?? '?';
    return { text: `Done with step ${step}: I read the files and updated the tests. ${'Details follow. '.repeat(30)}` };
  },
  // A summary built from the text it was given: the goals the user stated, so far.
  summarizer: (req) => ({
    status: 200,
    json: { ...completion(summaryOf(String(req.json.messages.at(-1).content)), 'chatcmpl-demo-summary'), model: req.json.model },
  }),
});
/** Each request's rescue lines (those with the compaction's figures), by request id. */
const rescueLines = new Map<string, string[]>();
const LEVELS: Record<number, string> = { 30: 'INFO', 40: 'WARN', 50: 'ERROR' };
const logStream = new Writable({
  write(chunk, _enc, done) {
    for (const text of chunk.toString().split('\n').filter(Boolean)) {
      const line = JSON.parse(text);
      // The access line carries the header as a string; a rescue's line, its figures as an object.
      if (typeof line.compaction === 'object' && line.requestId)
        rescueLines.set(line.requestId, [...(rescueLines.get(line.requestId) ?? []), `${LEVELS[line.level] ?? line.level} ${line.msg}`]);
    }
    done();
  },
});
const app = buildServer(
  validateConfig({ upstream: { url: provider.baseUrl }, compaction: { keepRecent: 4 }, auth: { metricsModelNames: true } }),
  { logStream },
);
await app.listen({ host: '127.0.0.1', port: 0 });
const gateway = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;

console.log(`A provider with a ${CONTEXT_TOKENS.toLocaleString()}-token window is at ${provider.baseUrl}`);
console.log(`The gateway is at ${gateway}/v1 — the agent's base URL points there.\n`);

const client = new OpenAI({ baseURL: `${gateway}/v1`, apiKey: 'any-placeholder', maxRetries: 0 });
const messages: OpenAI.Chat.ChatCompletionMessageParam[] = [
  { role: 'system', content: 'You are a careful coding agent. Keep answers short.' },
];

for (let turn = 1; turn <= TURNS; turn++) {
  messages.push({ role: 'user', content: `Step ${turn}: read module ${turn} and fix its tests. ${'Context: '.repeat(40)}` });
  const seen = { chat: provider.calls('chat').length, summarizer: provider.summarizerCalls().length };
  const { data, response } = await client.chat.completions.create({ model: 'demo-model', messages }).withResponse();
  const header = response.headers.get('x-gateway-compaction');
  const reply = data.choices[0].message.content ?? '';
  messages.push({ role: 'assistant', content: reply });
  const size = Buffer.byteLength(JSON.stringify(messages));
  console.log(
    `turn ${String(turn).padStart(2)}: ${messages.length} messages, ${(size / 1024).toFixed(1)} KB -> ${response.status} "${reply.slice(0, 40)}..."`,
  );
  if (!header) continue;

  for (const entry of sinceTurnStart(seen)) {
    const status = provider.answerStatus(entry.req);
    if (entry.kind === 'chat' && entry.refused !== null) console.log(`         the provider rejected it: ${status} "${entry.refused}"`);
    if (entry.kind === 'summarizer')
      console.log(`         the gateway asked the summarizer to condense the middle (${tokensOf(entry.req.body.length)} tokens in)`);
    const how = header.includes('trigger=proactive') ? 'sent it compacted ahead, knowing the conversation' : 'replayed it compacted';
    if (entry.kind === 'chat' && entry.refused === null)
      console.log(`         the gateway ${how} (${tokensOf(entry.req.body.length)} tokens): ${status}`);
  }
  console.log(`         x-gateway-compaction: ${header}`);
  for (const line of rescueLines.get(response.headers.get('x-request-id') ?? '') ?? []) console.log(`         log: ${line}`);
}

const metrics = await (await fetch(`${gateway}/metrics`)).text();
console.log('\nThe gateway\u2019s metrics about it (the series that are not zero):');
const about =
  /^gateway_(overlong|compactions|rescues|replays|summarizer_calls|summarizer_tokens|memory_lookups|memory_summarizer_calls_saved|learned_context)_|^gateway_compaction_request_bytes_sum/;
for (const line of metrics.split('\n')) {
  if (about.test(line) && !/ 0$/.test(line)) console.log(`  ${line}`);
}
console.log('\nThe agent never saw an error: the overflow cost one compaction and one replay, and the');
console.log('turns after it were sent compacted ahead with the remembered summary (memory=hit):');
console.log('no second rejection, no second summary.');
console.log(`\nWhat the gateway did, as a page: ${gateway}/status`);
// At a terminal (or with --serve) the gateway stays up for the page until Ctrl-C.
if (process.stdout.isTTY || process.argv.includes('--serve')) {
  console.log('Open it in a browser; Ctrl-C stops the demo.');
  await new Promise<void>((resolve) => process.once('SIGINT', () => resolve()));
}
await app.close();
await provider.close();

/** What reached the provider since `seen`, in the order it arrived: model calls with the rules' verdict, and summarizer calls. */
function sinceTurnStart(seen: { chat: number; summarizer: number }) {
  const verdicts = provider.verdicts('chat');
  const chat = provider
    .calls('chat')
    .map((req, i) => ({ kind: 'chat' as const, req, refused: verdicts[i] ?? null }))
    .slice(seen.chat);
  const summarizer = provider
    .summarizerCalls()
    .map((req) => ({ kind: 'summarizer' as const, req, refused: null }))
    .slice(seen.summarizer);
  return [...chat, ...summarizer].sort((a, b) => provider.received.indexOf(a.req) - provider.received.indexOf(b.req));
}

function summaryOf(transcript: string): string {
  // The person's inputs; in a call that merges partial summaries, the goals those listed.
  const asks = [...transcript.matchAll(/\[user\]\n\s*(.*)|^\s*- (Step .*)$/gm)].map((m) => `- ${(m[1] ?? m[2]).trim().slice(0, 80)}`);
  return `Goals so far:\n${[...new Set(asks)].join('\n')}\nState: each step was completed; tests were updated.`;
}
