import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { afterEach, expect, it } from 'vitest';
import { total } from '../helpers/exposition.js';
import { listening, runGateway, type Proc } from '../helpers/process.js';
import { startStandIn, type StandIn } from '../helpers/provider.js';
import { agentRequest } from '../helpers/rescue.js';

// Summarizer spend splits by the upstream whose request was compacted and the model its summarizer
// calls named: two upstreams, one with a summarizer model of its own, each rescuing one request,
// through the built process. The figures are the stand-ins' own counts of the calls they got.

let standIns: StandIn[] = [];
let proc: Proc | undefined;
afterEach(async () => {
  proc?.child.kill('SIGKILL');
  await Promise.all(standIns.map((s) => s.close()));
  standIns = [];
  proc = undefined;
});

it('calls, tokens, duration and rescues per upstream and summarizer model', async () => {
  const [openai, local] = (standIns = await Promise.all([startStandIn({ limitBytes: 60_000 }), startStandIn({ limitBytes: 60_000 })]));
  const config = join(mkdtempSync(join(tmpdir(), 'gw-cost-')), 'gw.yaml');
  writeFileSync(
    config,
    [
      'upstreams:',
      `  openai: { url: "${openai.baseUrl}", apis: [chat], summarizer: { model: cheap-summarizer } }`,
      `  local: { url: "${local.baseUrl}", apis: [chat] }`,
      'defaultUpstream: openai',
      'compaction: { mask: false }',
      'summarizer: { maxInputTokens: 500000 }',
      'auth: { metricsModelNames: true }',
    ].join('\n'),
  );
  proc = runGateway(['--config', config], { PORT: '0', LOG_FORMAT: 'json' });
  const origin = await listening(proc);
  for (const [prefix, model] of [
    ['openai', 'gpt-big'],
    ['local', 'qwen3-coder'],
  ]) {
    const sdk = new OpenAI({ baseURL: `${origin}/${prefix}/v1`, apiKey: 'sk-client', maxRetries: 0, timeout: 15_000 });
    const answer = await sdk.chat.completions.create({ ...agentRequest(60), model } as never);
    expect(answer.choices[0].message).toBeDefined();
  }
  expect(openai.summarizerCalls().length).toBeGreaterThan(0);
  expect(local.summarizerCalls().length).toBeGreaterThan(0);
  expect(openai.summarizerCalls().every((c) => c.json.model === 'cheap-summarizer')).toBe(true);

  const metrics = await (await fetch(`${origin}/metrics`)).text();
  expect(total(metrics, 'gateway_summarizer_calls_total', { upstream: 'openai', model: 'cheap-summarizer' })).toBe(
    openai.summarizerCalls().length,
  );
  expect(total(metrics, 'gateway_summarizer_calls_total', { upstream: 'local', model: 'qwen3-coder' })).toBe(
    local.summarizerCalls().length,
  );
  expect(total(metrics, 'gateway_summarizer_calls_total')).toBe(openai.summarizerCalls().length + local.summarizerCalls().length);
  for (const [upstream, model] of [
    ['openai', 'cheap-summarizer'],
    ['local', 'qwen3-coder'],
  ]) {
    expect(total(metrics, 'gateway_summarizer_tokens_total', { upstream, model, direction: 'input' })).toBeGreaterThan(0);
    expect(total(metrics, 'gateway_summarizer_duration_seconds_count', { upstream, model })).toBe(1);
    expect(total(metrics, 'gateway_rescues_total', { upstream, outcome: 'replayed' })).toBe(1);
  }
  // The config's summarizer model is known at start, at 0; nothing else of it was counted.
  expect(total(metrics, 'gateway_summarizer_failures_total', { upstream: 'openai', model: 'cheap-summarizer' })).toBe(0);
  expect(metrics).toMatch(/^gateway_summarizer_failures_total\{kind="timeout",upstream="openai",model="cheap-summarizer"\} 0$/m);
});
