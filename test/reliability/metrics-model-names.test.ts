import OpenAI from 'openai';
import { afterEach, expect, it } from 'vitest';
import type { ConfigInput } from '../../src/config/schema.js';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { startStandIn, type StandIn } from '../helpers/provider.js';
import { agentRequest, parseCompactionHeader } from '../helpers/rescue.js';

/*
 * Tenants' model names are not on a /metrics anyone can read (#44, finding 10): without
 * auth.metricsKey every `model` label reads "hidden"; with the key (a scrape must send it), or
 * with auth.metricsModelNames on (a /metrics only a trusted network reaches), they are shown. The
 * summarizer models the config names are the operator's own and always shown. The series and
 * their other labels stay, so dashboards and alerts keep working.
 */

const LIMIT = 60_000;
const MODEL = 'tenant-secret-model-x7';

let provider: StandIn;
let gateway: TestGateway;
afterEach(async () => {
  await gateway?.close();
  await provider?.close();
});

async function metricsAfterRescue(auth: ConfigInput['auth']): Promise<string> {
  provider = await startStandIn({ limitBytes: LIMIT, tooLong: 'stated', reply: () => ({ text: 'rescued answer' }) });
  gateway = await startGateway({ upstream: { url: provider.baseUrl }, summarizer: { maxInputTokens: 500_000 }, auth });
  const client = new OpenAI({ baseURL: gateway.baseUrl, apiKey: auth?.keys?.[0] ?? 'sk-client', maxRetries: 0 });
  const { response } = await client.chat.completions
    .create({ ...(agentRequest(60) as OpenAI.ChatCompletionCreateParamsNonStreaming), model: MODEL })
    .withResponse();
  expect(parseCompactionHeader(response.headers.get('x-gateway-compaction'))).toMatchObject({ outcome: 'replayed' });
  const headers: Record<string, string> = auth?.metricsKey ? { authorization: `Bearer ${auth.metricsKey}` } : {};
  const res = await fetch(`${gateway.origin}/metrics`, { headers });
  expect(res.status).toBe(200);
  return res.text();
}

it('without metricsKey: every model label reads "hidden", the series stay', async () => {
  const metrics = await metricsAfterRescue(undefined);
  expect(metrics).not.toContain(MODEL);
  expect(metrics).toMatch(/^gateway_learned_context_limit_tokens\{model="hidden"\} \d+$/m);
  expect(metrics).toMatch(/^gateway_summarizer_calls_total\{upstream="default",model="hidden"\} [1-9]\d*$/m);
});

it.each([
  ['with metricsKey (the scrape sends it)', { metricsKey: 'metrics-key-123456' }],
  ['with auth.metricsModelNames on', { metricsModelNames: true }],
])('%s: model names shown', async (_name, auth) => {
  const metrics = await metricsAfterRescue(auth);
  expect(metrics).toMatch(new RegExp(`^gateway_learned_context_limit_tokens\\{model="${MODEL}"\\} \\d+$`, 'm'));
  expect(metrics).toMatch(new RegExp(`^gateway_summarizer_calls_total\\{upstream="default",model="${MODEL}"\\} [1-9]\\d*$`, 'm'));
  expect(metrics).not.toContain('model="hidden"');
});

it('a summarizer model the config names is shown without metricsKey: the operator chose it', async () => {
  provider = await startStandIn({ limitBytes: LIMIT, tooLong: 'stated', reply: () => ({ text: 'rescued answer' }) });
  gateway = await startGateway({
    upstream: { url: provider.baseUrl },
    summarizer: { maxInputTokens: 500_000, model: 'operators-summarizer' },
  });
  const metrics = await (await fetch(`${gateway.origin}/metrics`)).text();
  expect(metrics).toMatch(/^gateway_summarizer_calls_total\{upstream="default",model="operators-summarizer"\} 0$/m);
});
