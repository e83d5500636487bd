import { spawnSync } from 'node:child_process';
import { afterEach, describe, expect, it } from 'vitest';
import type { Gauge } from 'prom-client';
import { validateConfig } from '../../src/config/load.js';
import { CLIENT_LABEL_LIMIT, LABEL_MAX_CHARS, boundedLabel, combinations, createMetrics } from '../../src/telemetry/metrics.js';
import { buildServer } from '../../src/server.js';
import { json, completion, startFakeUpstream, type FakeUpstream } from '../helpers/fake-upstream.js';
import { postChat, startGateway, type TestGateway } from '../helpers/gateway.js';

// promtool (Debian's `prometheus` package; .ci/run installs it) checks a live scrape. Without it
// the check is skipped locally, loudly, and fails under CI.
const HAVE_PROMTOOL = spawnSync('promtool', ['--version'], { stdio: 'ignore' }).status === 0;
if (!HAVE_PROMTOOL && process.env.CI) throw new Error('promtool is not installed, and CI needs the metrics check to run');
if (!HAVE_PROMTOOL) console.warn('promtool not found on PATH: skipping `promtool check metrics` (apt-get install prometheus)');

let upstream: FakeUpstream;
let gateway: TestGateway;
afterEach(async () => {
  await gateway.close();
  await upstream.close();
});

async function start(config: Record<string, unknown> = {}): Promise<void> {
  upstream = await startFakeUpstream((req, res) => json(res, 200, req.url.includes('chat') ? completion('ok') : { data: [] }));
  gateway = await startGateway({ upstream: { url: upstream.baseUrl }, ...config });
}

const scrape = async () => (await fetch(`${gateway.origin}/metrics`)).text();

describe('/metrics', () => {
  it.skipIf(!HAVE_PROMTOOL)('passes `promtool check metrics` after traffic on every route', async () => {
    await start();
    await postChat(gateway, { model: 'm', messages: [{ role: 'user', content: 'hi' }] });
    await fetch(`${gateway.baseUrl}/models`);
    await fetch(`${gateway.origin}/nowhere`);
    const check = spawnSync('promtool', ['check', 'metrics'], { input: await scrape(), encoding: 'utf8', timeout: 10_000 });
    expect(check.stdout + check.stderr).toBe('');
    expect(check.status).toBe(0);
  });

  it('has the counters alerts need at 0 before any event', async () => {
    // A summarizer model the config names is known before any compaction; a request's own is not.
    await start({ summarizer: { model: 'small-summarizer' } });
    const text = await scrape();
    const zero = (series: string) => expect(text).toContain(`${series} 0\n`);
    for (const api of ['chat', 'responses', 'messages']) {
      zero(`gateway_overlong_rejections_total{api="${api}",reason="context_length",upstream="default"}`);
      zero(`gateway_overlong_rejections_total{api="${api}",reason="body_too_large",upstream="default"}`);
      zero(`gateway_compactions_total{api="${api}",strategy="summarize",outcome="replayed",upstream="default"}`);
      zero(`gateway_replays_total{api="${api}",result="success",upstream="default"}`);
    }
    zero('gateway_compactions_total{api="chat",strategy="fallback",outcome="replay_failed",upstream="default"}');
    zero('gateway_compactions_total{api="messages",strategy="clamp",outcome="replayed",upstream="default"}');
    zero('gateway_compactions_total{api="responses",strategy="none",outcome="not_shrunk",upstream="default"}');
    for (const result of ['success', 'upstream_error', 'still_overlong', 'failed'])
      zero(`gateway_replays_total{api="chat",result="${result}",upstream="default"}`);
    for (const kind of ['timeout', 'unreachable', 'rejected', 'bad_response', 'aborted'])
      zero(`gateway_summarizer_failures_total{kind="${kind}",upstream="default",model="small-summarizer"}`);
    zero('gateway_summarizer_calls_total{upstream="default",model="small-summarizer"}');
    zero('gateway_summarizer_duration_seconds_count{upstream="default",model="small-summarizer"}');
    for (const outcome of ['replayed', 'replay_failed', 'not_shrunk', 'shed', 'disabled'])
      zero(`gateway_rescues_total{api="chat",outcome="${outcome}",upstream="default"}`);
    zero('gateway_memory_store_errors_total{operation="read"}');
    zero('gateway_memory_store_errors_total{operation="write"}');
  });

  it('labels pass-through requests by a bounded endpoint family, never by the raw path', async () => {
    await start();
    const paths = [
      '/models',
      '/models/gpt-x',
      '/embeddings',
      '/responses/resp_1',
      '/messages/count_tokens',
      '/chat/completions/abc',
      '/files',
      '/a/b/c',
    ];
    for (const path of paths) await fetch(`${gateway.baseUrl}${path}`);
    const routes = new Set([...(await scrape()).matchAll(/^gateway_http_requests_total\{route="([^"]+)"/gm)].map((m) => m[1]));
    expect([...routes].sort()).toEqual(
      [
        'passthrough_chat',
        'passthrough_embeddings',
        'passthrough_messages',
        'passthrough_models',
        'passthrough_other',
        'passthrough_responses',
      ].sort(),
    );
  });
});

describe('bounded label values', () => {
  it('the learned-limit gauges keep the first models a client names, then "other"', async () => {
    const metrics = createMetrics();
    const app = buildServer(validateConfig({ upstream: { url: 'http://127.0.0.1:9/v1' } }), { metrics });
    // The server's memory registered them (memory is on by default); the memory sets them through its handle.
    const gauge = metrics.registry.getSingleMetric('gateway_learned_context_limit_tokens') as Gauge<'model'>;
    expect(gauge).toBeDefined();
    const handle = metrics.memory().learnedContextLimit;
    for (let i = 0; i < CLIENT_LABEL_LIMIT + 30; i++) handle.set(`model-${i}`, 1000 + i);
    handle.set('model-0', 4096);
    const values = (await gauge.get()).values;
    expect(values).toHaveLength(CLIENT_LABEL_LIMIT + 1);
    expect(values.find((v) => v.labels.model === 'model-0')?.value).toBe(4096);
    expect(values.find((v) => v.labels.model === 'other')?.value).toBe(1000 + CLIENT_LABEL_LIMIT + 29);
    await app.close();
  });

  it('the summarizer\'s model label keeps the first models, then "other", each with all its series at 0 from its first use', async () => {
    const metrics = createMetrics(['default']);
    for (let i = 0; i < CLIENT_LABEL_LIMIT + 10; i++) metrics.summarizerCalls.inc(metrics.summarizerLabels('default', `model-${i}`), 1);
    expect(metrics.summarizerLabels('default', '')).toEqual({ upstream: 'default', model: 'other' });
    const calls = (await metrics.registry.getSingleMetric('gateway_summarizer_calls_total')!.get()).values;
    expect(calls).toHaveLength(CLIENT_LABEL_LIMIT + 1);
    expect(calls.find((v) => v.labels.model === 'other')?.value).toBe(10);
    const failures = (await metrics.registry.getSingleMetric('gateway_summarizer_failures_total')!.get()).values;
    expect(failures).toHaveLength((CLIENT_LABEL_LIMIT + 1) * 6);
    expect(failures.every((v) => v.value === 0)).toBe(true);
  });

  it('keeps the first N distinct values, then says "other", and keeps answering the same for a known one', () => {
    const label = boundedLabel(3);
    expect(['a', 'b', 'a', 'c', 'd', 'e', 'b'].map(label)).toEqual(['a', 'b', 'a', 'c', 'other', 'other', 'b']);
  });

  it('cuts a value longer than LABEL_MAX_CHARS, so no client can make a label megabytes long', () => {
    const label = boundedLabel(3);
    const long = `m${'x'.repeat(1_000_000)}`;
    expect(label(long)).toBe(long.slice(0, LABEL_MAX_CHARS));
    expect(label(`${long}y`)).toBe(long.slice(0, LABEL_MAX_CHARS));
    expect(label('gpt-6')).toBe('gpt-6');
  });

  it('combinations spans every label value', () => {
    expect(combinations({ reason: ['x', 'y'], api: ['chat', 'responses'] })).toEqual([
      { reason: 'x', api: 'chat' },
      { reason: 'x', api: 'responses' },
      { reason: 'y', api: 'chat' },
      { reason: 'y', api: 'responses' },
    ]);
  });
});
