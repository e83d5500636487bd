import { afterEach, expect, it } from 'vitest';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { startStandIn, type Scripted, type StandIn } from '../helpers/provider.js';
import type { Received } from '../helpers/fake-upstream.js';
import { agentRequest } from '../helpers/rescue.js';

let provider: StandIn;
let gateway: TestGateway;
afterEach(async () => {
  await gateway.close();
  await provider.close();
});

it('the client aborting during compaction cancels the summarizer call and sends no replay', async () => {
  let summarizing!: (req: Received) => void;
  const summarizerCalled = new Promise<Received>((r) => (summarizing = r));
  provider = await startStandIn({
    limitBytes: 60_000,
    summarizer: (req) => {
      summarizing(req);
      return new Promise<Scripted>(() => {}); // never answered: hangs until the gateway gives up on it
    },
  });
  // Masking off: the compaction is the summarizer's. The summarizer is the upstream's own model,
  // so its calls are sized to the window the refusal stated: several, some at once.
  gateway = await startGateway({
    upstream: { url: provider.baseUrl },
    summarizer: { maxInputTokens: 500_000 },
    compaction: { mask: false },
  });
  const controller = new AbortController();
  const pending = fetch(`${gateway.baseUrl}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(agentRequest(60)),
    signal: controller.signal,
  }).catch((e) => e);
  const summarizerRequest = await summarizerCalled;
  controller.abort();
  await pending;
  await summarizerRequest.aborted; // resolves only if the gateway closed the summarizer request
  // Give a wrongly-sent replay (or summarizer call) time to arrive before counting.
  await new Promise((r) => setTimeout(r, 200));
  expect(provider.calls('chat')).toHaveLength(1);
  expect(provider.verdicts('chat')).toEqual([expect.stringMatching(/maximum context length/)]);
  const summarizer = provider.summarizerCalls();
  expect(summarizer.length).toBeGreaterThanOrEqual(1);
  // Every summarizer call that went out was closed by the gateway (each hangs until then).
  const closed = await Promise.all(
    summarizer.map((r) => Promise.race([r.aborted.then(() => true), new Promise((done) => setTimeout(() => done(false), 1_000))])),
  );
  expect(closed).toEqual(summarizer.map(() => true));
});
