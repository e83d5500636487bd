import OpenAI from 'openai';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { completion, json, startFakeUpstream, type FakeUpstream } from '../helpers/fake-upstream.js';
import { startGateway, type TestGateway } from '../helpers/gateway.js';

/*
 * A request read for a compaction ahead that does not happen (its tenant is known to memory, its
 * conversation extends nothing remembered) goes as sent and holds nothing of the rescue budget
 * while the upstream thinks: a hundred agents waiting on their models must not shed each other's
 * rescues.
 */

const LIMIT = 20_000;
let upstream: FakeUpstream;
let gateway: TestGateway;
let release: (() => void) | undefined;

beforeAll(async () => {
  upstream = await startFakeUpstream(async (req, res) => {
    if (req.headers['x-gateway-compaction'] === 'summarizer') return json(res, 200, completion('SUMMARY: the build was fixed.'));
    if (req.body.length > LIMIT) {
      return json(res, 400, {
        error: {
          message: `This model's maximum context length is ${LIMIT / 4} tokens. However, your messages resulted in ${req.body.length} tokens.`,
          type: 'invalid_request_error',
          param: 'messages',
          code: 'context_length_exceeded',
        },
      });
    }
    if (req.json?.messages?.at(-1)?.content === 'wait for me') await new Promise<void>((resolve) => (release = resolve));
    json(res, 200, completion('the answer'));
  });
  gateway = await startGateway({ upstream: { url: upstream.baseUrl } });
});

afterAll(async () => {
  release?.();
  await gateway.close();
  await upstream.close();
});

const rounds = (n: number, task: string) => [
  { role: 'system' as const, content: 'You are a coding agent.' },
  { role: 'user' as const, content: task },
  ...Array.from({ length: n }, (_, i) => [
    {
      role: 'assistant' as const,
      content: null,
      tool_calls: [{ id: `c${i}`, type: 'function' as const, function: { name: 'bash', arguments: '{"command":"npm test"}' } }],
    },
    { role: 'tool' as const, tool_call_id: `c${i}`, content: 'FAIL src/a.test.ts\n'.repeat(60) },
  ]).flat(),
];

async function inUse(): Promise<number> {
  const text = await (await fetch(`${gateway.origin}/metrics`)).text();
  return Number(/^gateway_rescue_budget_bytes\{state="in_use"\} (\d+)/m.exec(text)?.[1]);
}

it('a request of a known tenant that extends nothing holds no budget while its upstream answers', async () => {
  const client = new OpenAI({ baseURL: gateway.baseUrl, apiKey: 'sk-tenant-a', maxRetries: 0 });
  // A rescue makes the tenant known to memory: its next requests are read before their first attempt.
  const rescued = await client.chat.completions.create({ model: 'gpt-test', messages: rounds(30, 'Fix the build.') }).withResponse();
  expect(rescued.response.headers.get('x-gateway-compaction')).toMatch(/outcome=replayed/);
  expect(await inUse()).toBe(0);

  // Another conversation of the same tenant, small enough to be accepted, held by the upstream.
  const pending = client.chat.completions.create({
    model: 'gpt-test',
    messages: [...rounds(3, 'Write the docs.'), { role: 'user', content: 'wait for me' }],
  });
  await expect.poll(() => release !== undefined, { timeout: 5_000 }).toBe(true);
  expect(await inUse()).toBe(0);
  release!();
  expect((await pending).choices[0].message.content).toBe('the answer');
});
