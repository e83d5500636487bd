import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { startStandIn, type StandIn } from '../helpers/provider.js';

/*
 * A replayed request is the client's request with its conversation rewritten, not the client's
 * request re-serialised: numbers JavaScript cannot hold (a 64-bit seed), `1.0`, and every kept
 * message go upstream as the client wrote them.
 */

const round = (i: number) =>
  `{"role":"assistant","content":null,"tool_calls":[{"id":"c${i}","type":"function","function":{"name":"bash","arguments":"{\\"command\\":\\"cat f${i}\\"}"}}]},` +
  `{"role":"tool","tool_call_id":"c${i}","content":"${'line of output '.repeat(300)}"}`;

const LAST = '{"role": "user",   "content": "Go on, \\u00e9 and 1.0 stay as written."}';
const body =
  '{ "model": "gpt-test", "seed": 12345678901234567890, "temperature": 1.0, "logit_bias": {"50256": -100.0},\n  "messages": [' +
  '{"role":"system","content":"You are a coding agent."},{"role":"user","content":"Fix the build."},' +
  Array.from({ length: 12 }, (_, i) => round(i)).join(',') +
  `,${LAST}] }`;

let provider: StandIn;
let gateway: TestGateway;

beforeAll(async () => {
  provider = await startStandIn({ limitBytes: 30_000 });
  gateway = await startGateway({ upstream: { url: provider.baseUrl } });
});

afterAll(async () => {
  await gateway.close();
  await provider.close();
});

describe('a replayed body keeps the bytes of what it did not change', () => {
  it('the seed, 1.0, -100.0 and the last message as sent; only the conversation rewritten', async () => {
    const res = await fetch(`${gateway.baseUrl}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: 'Bearer sk-client' },
      body,
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('x-gateway-compaction')).toMatch(/outcome=replayed/);
    const calls = provider.calls('chat');
    expect(calls).toHaveLength(2);
    const [first, replay] = calls;
    // Refused for its size, and the replay taken by the strict rules as it was written.
    expect(provider.verdicts('chat')).toEqual([expect.stringMatching(/maximum context length is 7500 tokens/), null]);
    expect(first.body.toString()).toBe(body);
    const sent = replay.body.toString();
    expect(sent.length).toBeLessThan(body.length);
    expect(sent).toContain('"seed":12345678901234567890');
    expect(sent).toContain('"temperature":1.0');
    expect(sent).toContain('"logit_bias":{"50256": -100.0}');
    expect(sent).toContain(LAST);
    expect(sent).toContain('{"role":"system","content":"You are a coding agent."}');
    // Re-serialised, the seed would have become 12345678901234567000 and 1.0 plain 1.
    expect(sent).not.toContain('12345678901234567000');
  });
});
