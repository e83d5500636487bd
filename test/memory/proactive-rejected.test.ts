import { afterEach, expect, it } from 'vitest';
import { postChat, startGateway, type TestGateway } from '../helpers/gateway.js';
import { startStandIn, type StandIn } from '../helpers/provider.js';
import { expectValidReplay, parseCompactionHeader } from '../helpers/rescue.js';
import { windowError } from '../helpers/strict-chat.js';
import { sessionRequest, firstOverflow } from './session.js';

let provider: StandIn;
let gateway: TestGateway;
afterEach(async () => {
  await gateway.close();
  await provider.close();
});

const request = (turns: number) => sessionRequest(turns);

it('a proactive compaction the provider still rejects gets one reactive rescue, not a loop', async () => {
  const limitBytes = 60_000;
  provider = await startStandIn({ limitBytes, tooLong: 'stated' });
  gateway = await startGateway({
    upstream: { url: provider.baseUrl },
    summarizer: { maxInputTokens: 500_000 },
    compaction: { proactive: true },
    // A single-user sidecar: its client sends no credential, and opts in to a memory all the same.
    memory: { shareAnonymous: true },
  });
  const n = firstOverflow(limitBytes);
  expect((await postChat(gateway, request(n))).status).toBe(200);

  // The provider's window shrinks (another deployment behind the same URL, say): what memory
  // proposes is now too long too.
  const before = provider.calls('chat').length;
  provider.script((req) => ({ status: 400, json: windowError(req.body.length, 11_500) }));
  const res = await postChat(gateway, request(n + 1));
  const calls = provider.calls('chat').slice(before);
  expect(res.status).toBe(200);
  expect(calls).toHaveLength(2);
  expect(calls[0].headers['x-gateway-compaction']).toMatch(/trigger=proactive/);
  expect(calls[0].body.length).toBeGreaterThan(11_500);
  expect(calls[1].body.length).toBeLessThanOrEqual(11_500);
  const original = Buffer.from(JSON.stringify(request(n + 1)));
  expectValidReplay({ ...calls[1], json: request(n + 1), body: original }, calls[1]);
  expect(parseCompactionHeader(res.headers.get('x-gateway-compaction'))).toMatchObject({
    outcome: 'replayed',
    trigger: 'rejected',
    memory: 'miss',
  });
});
