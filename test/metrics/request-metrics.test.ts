import { describe, expect, it } from 'vitest';
import { CLIENT_LABEL_LIMIT, createMetrics } from '../../src/telemetry/metrics.js';

/*
 * The series every request updates, as a scrape reads them: the calls the server and the rescue
 * make (requests.inc, duration.observe, upstreamTtfb.observe) and the exposition lines they must
 * produce. The expected text is written out here, not taken from prom-client.
 */

const BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300];

/** The lines of one metric family in the scrape (its HELP and TYPE lines left out). */
async function lines(metrics: ReturnType<typeof createMetrics>, prefix: string): Promise<string[]> {
  return (await metrics.registry.metrics()).split('\n').filter((l) => l.startsWith(prefix));
}

/** A histogram's lines for one series, from its observations: cumulative buckets (le inclusive), +Inf, sum, count. */
function histogramLines(name: string, labels: string, observed: number[]): string[] {
  const out = BUCKETS.map((le) => `${name}_bucket{le="${le}",${labels}} ${observed.filter((v) => v <= le).length}`);
  const sum = observed.reduce((a, b) => a + b, 0);
  return [
    ...out,
    `${name}_bucket{le="+Inf",${labels}} ${observed.length}`,
    `${name}_sum{${labels}} ${sum}`,
    `${name}_count{${labels}} ${observed.length}`,
  ];
}

describe('gateway_http_requests_total', () => {
  it('counts by route, method, status class and upstream, in order of first appearance', async () => {
    const metrics = createMetrics();
    metrics.requests.inc('/v1/chat/completions', 'POST', 200, 'default');
    metrics.requests.inc('/v1/chat/completions', 'POST', 201, 'default');
    metrics.requests.inc('/v1/messages', 'POST', 413, 'default');
    metrics.requests.inc('/v1/chat/completions', 'POST', 502, 'second');
    metrics.requests.inc('passthrough_models', 'GET', 404, 'default');
    expect(await lines(metrics, 'gateway_http_requests_total')).toEqual([
      'gateway_http_requests_total{route="/v1/chat/completions",method="POST",status_class="2xx",upstream="default"} 2',
      'gateway_http_requests_total{route="/v1/messages",method="POST",status_class="4xx",upstream="default"} 1',
      'gateway_http_requests_total{route="/v1/chat/completions",method="POST",status_class="5xx",upstream="second"} 1',
      'gateway_http_requests_total{route="passthrough_models",method="GET",status_class="4xx",upstream="default"} 1',
    ]);
  });

  it("has no upstream label on the gateway's own answers, and every status class from 1xx to 5xx", async () => {
    const metrics = createMetrics();
    for (const status of [101, 204, 308, 451, 599]) metrics.requests.inc('/metrics', 'GET', status);
    expect(await lines(metrics, 'gateway_http_requests_total')).toEqual(
      ['1xx', '2xx', '3xx', '4xx', '5xx'].map((c) => `gateway_http_requests_total{route="/metrics",method="GET",status_class="${c}"} 1`),
    );
  });

  it('escapes a route with quotes and backslashes', async () => {
    const metrics = createMetrics();
    metrics.requests.inc('a "quoted" \\ route', 'POST', 200);
    expect(await lines(metrics, 'gateway_http_requests_total')).toEqual([
      'gateway_http_requests_total{route="a \\"quoted\\" \\\\ route",method="POST",status_class="2xx"} 1',
    ]);
  });
});

describe('the latency histograms', () => {
  it('gateway_http_request_duration_seconds: every bucket bound, just under and just over it, zero and past the last bound', async () => {
    const metrics = createMetrics();
    const observed = [...BUCKETS.flatMap((b) => [b, b * 0.999, b * 1.001]), 0, 1_000];
    for (const seconds of observed) metrics.duration.observe('/v1/chat/completions', seconds);
    metrics.duration.observe('/v1/messages', 0.02);
    expect(await lines(metrics, 'gateway_http_request_duration_seconds')).toEqual([
      ...histogramLines('gateway_http_request_duration_seconds', 'route="/v1/chat/completions"', observed),
      ...histogramLines('gateway_http_request_duration_seconds', 'route="/v1/messages"', [0.02]),
    ]);
  });

  it('gateway_upstream_ttfb_seconds is kept by route and upstream', async () => {
    const metrics = createMetrics(['default', 'second']);
    metrics.upstreamTtfb.observe('/v1/responses', 0.3, 'default');
    metrics.upstreamTtfb.observe('/v1/responses', 7, 'second');
    metrics.upstreamTtfb.observe('/v1/responses', 0.04, 'default');
    expect(await lines(metrics, 'gateway_upstream_ttfb_seconds')).toEqual([
      ...histogramLines('gateway_upstream_ttfb_seconds', 'route="/v1/responses",upstream="default"', [0.3, 0.04]),
      ...histogramLines('gateway_upstream_ttfb_seconds', 'route="/v1/responses",upstream="second"', [7]),
    ]);
  });

  it('all three are in the scrape with their help and type before any request', async () => {
    const text = await createMetrics().registry.metrics();
    expect(text).toContain('# TYPE gateway_http_requests_total counter\n');
    expect(text).toContain('# TYPE gateway_http_request_duration_seconds histogram\n');
    expect(text).toContain('# TYPE gateway_upstream_ttfb_seconds histogram\n');
    expect(text).toMatch(
      /^# HELP gateway_http_request_duration_seconds Time from the request reaching the gateway to the last byte of the response, by route\.$/m,
    );
  });
});

describe("the compaction memory's metrics", () => {
  const MEMORY_FAMILIES = [
    'gateway_memory_lookups_total',
    'gateway_memory_summarizer_calls_saved_total',
    'gateway_proactive_compactions_total',
    'gateway_memory_store_errors_total',
    'gateway_learned_context_limit_tokens',
    'gateway_learned_body_limit_bytes',
    'gateway_memory_lease_waits_total',
  ];

  it('are in the scrape only once memory asks for them, once however often it asks, with their zero series', async () => {
    const metrics = createMetrics();
    const before = await metrics.registry.metrics();
    for (const name of MEMORY_FAMILIES) expect(before).not.toContain(`# TYPE ${name} `);
    expect(metrics.memory()).toBe(metrics.memory());
    const text = await metrics.registry.metrics();
    for (const name of MEMORY_FAMILIES) expect(text).toContain(`# TYPE ${name} `);
    for (const series of [
      'gateway_memory_store_errors_total{operation="read"} 0',
      'gateway_memory_store_errors_total{operation="write"} 0',
      'gateway_memory_lease_waits_total{result="reused"} 0',
      'gateway_memory_lease_waits_total{result="timed_out"} 0',
    ])
      expect(text).toContain(`\n${series}\n`);
  });

  it('the learned-limit gauges bound the model label, each on its own', async () => {
    const metrics = createMetrics();
    const { learnedContextLimit, learnedBodyLimit } = metrics.memory();
    for (let i = 0; i < CLIENT_LABEL_LIMIT + 5; i++) learnedContextLimit.set(`model-${i}`, 1000 + i);
    learnedBodyLimit.set('late-model', 4_000_000);
    const tokens = await lines(metrics, 'gateway_learned_context_limit_tokens');
    expect(tokens).toHaveLength(CLIENT_LABEL_LIMIT + 1);
    expect(tokens.at(-1)).toBe(`gateway_learned_context_limit_tokens{model="other"} ${1000 + CLIENT_LABEL_LIMIT + 4}`);
    expect(await lines(metrics, 'gateway_learned_body_limit_bytes')).toEqual([
      'gateway_learned_body_limit_bytes{model="late-model"} 4000000',
    ]);
  });
});
