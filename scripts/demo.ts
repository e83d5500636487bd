/**
 * npm run demo: a conversation through the gateway until the provider's window overflows, and
 * what the gateway did about it. Offline: the provider is a local stand-in; no key is needed.
 */
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import OpenAI from 'openai';
import { validateConfig } from '../src/config/load.js';
import { buildServer } from '../src/server.js';
import { startDemoProvider } from './demo-provider.js';

const CONTEXT_TOKENS = 2_000;
const TURNS = 10;

const provider = await startDemoProvider(CONTEXT_TOKENS);
const warnings: string[] = [];
const logStream = new Writable({
  write(chunk, _enc, done) {
    const line = JSON.parse(chunk.toString());
    if (line.level === 40) warnings.push(line.msg);
    done();
  },
});
const app = buildServer(validateConfig({ upstream: { url: provider.baseUrl }, compaction: { keepRecent: 4 } }), { logStream });
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
  const seen = provider.log.length;
  const { data, response } = await client.chat.completions.create({ model: 'demo-model', messages }).withResponse();
  const header = response.headers.get('x-gateway-compaction');
  const reply = data.choices[0].message.content ?? '';
  messages.push({ role: 'assistant', content: reply });
  const size = Buffer.byteLength(JSON.stringify(messages));
  console.log(`turn ${String(turn).padStart(2)}: ${messages.length} messages, ${(size / 1024).toFixed(1)} KB -> ${response.status} "${reply.slice(0, 40)}..."`);
  if (!header) continue;

  for (const entry of provider.log.slice(seen)) {
    if (entry.kind === 'chat' && entry.status !== 200) console.log(`         the provider rejected it: ${entry.status} "${entry.error}"`);
    if (entry.kind === 'summarizer') console.log(`         the gateway asked the summarizer to condense the middle (${entry.tokens} tokens in)`);
    const how = header.includes('trigger=proactive') ? 'sent it compacted ahead, knowing the conversation' : 'replayed it compacted';
    if (entry.kind === 'chat' && entry.status === 200) console.log(`         the gateway ${how} (${entry.tokens} tokens): 200`);
  }
  console.log(`         x-gateway-compaction: ${header}`);
  console.log(`         log: ${warnings.at(-1)}`);
}

const metrics = await (await fetch(`${gateway}/metrics`)).text();
console.log('\nThe gateway\u2019s metrics about it:');
for (const line of metrics.split('\n')) {
  if (/^gateway_(overlong|compactions|replays|summarizer_calls|memory_lookups|memory_summarizer_calls_saved|learned_context)_/.test(line) || /^gateway_compaction_request_bytes_sum/.test(line)) console.log(`  ${line}`);
}
console.log('\nThe agent never saw an error: the overflow cost one compaction and one replay, and the');
console.log('turns after it were sent compacted ahead with the remembered summary (memory=hit):');
console.log('no second rejection, no second summary.');
await app.close();
await provider.close();
