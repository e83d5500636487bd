import { afterEach, expect, it } from 'vitest';
import { postChat, startGateway, type TestGateway } from '../helpers/gateway.js';
import { startProvider, type FakeProvider, type ProviderOptions } from '../helpers/provider.js';
import { expectValidReplay, parseCompactionHeader } from '../helpers/rescue.js';
import { sessionRequest, firstOverflow } from './session.js';

let provider: FakeProvider;
let gateway: TestGateway;
afterEach(async () => {
  await gateway.close();
  await provider.close();
});

const request = (turns: number) => sessionRequest(turns);

it('a proactive compaction the provider still rejects gets one reactive rescue, not a loop', async () => {
  const options: ProviderOptions = { limitBytes: 60_000, style: 'openai_400' };
  provider = await startProvider(options);
  gateway = await startGateway({
    upstream: { url: provider.baseUrl },
    summarizer: { maxInputTokens: 500_000 },
    compaction: { proactive: true },
    // A single-user sidecar: its client sends no credential, and opts in to a memory all the same.
    memory: { shareAnonymous: true },
  });
  const n = firstOverflow(options.limitBytes);
  expect((await postChat(gateway, request(n))).status).toBe(200);

  // The provider's window shrinks (another deployment behind the same URL, say): what memory
  // proposes is now too long too.
  options.limitBytes = 11_500;
  const before = provider.chatCalls().length;
  const res = await postChat(gateway, request(n + 1));
  const calls = provider.chatCalls().slice(before);
  expect(res.status).toBe(200);
  expect(calls).toHaveLength(2);
  expect(calls[0].headers['x-gateway-compaction']).toMatch(/trigger=proactive/);
  expect(calls[1].body.length).toBeLessThanOrEqual(11_500);
  const original = Buffer.from(JSON.stringify(request(n + 1)));
  expectValidReplay({ ...calls[1], json: request(n + 1), body: original }, calls[1]);
  expect(parseCompactionHeader(res.headers.get('x-gateway-compaction'))).toMatchObject({
    outcome: 'replayed',
    trigger: 'rejected',
    memory: 'miss',
  });
});
