import { Counter, Histogram, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { RequestCounter, RouteHistogram } from '../../src/request-metrics.js';

/*
 * The per-request series are kept by request-metrics.ts, not by prom-client's Counter and
 * Histogram; a scrape must not be able to tell. Each case feeds both the same observations and
 * compares the registries' whole exposition text, byte for byte.
 */

const BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300];

function registries(openMetrics = false) {
  const theirs = new Registry();
  const ours = new Registry();
  if (openMetrics) for (const r of [theirs, ours]) r.setContentType(Registry.OPENMETRICS_CONTENT_TYPE as never);
  const counter = new Counter({ name: 'gateway_http_requests_total', help: 'Requests.', labelNames: ['route', 'method', 'status_class'], registers: [theirs] });
  const histogram = new Histogram({ name: 'gateway_http_request_duration_seconds', help: 'Time.', labelNames: ['route'], buckets: BUCKETS, registers: [theirs] });
  const requests = new RequestCounter('gateway_http_requests_total', 'Requests.');
  const duration = new RouteHistogram('gateway_http_request_duration_seconds', 'Time.', BUCKETS);
  ours.registerMetric(requests as never);
  ours.registerMetric(duration as never);
  const record = (route: string, method: string, status: number, seconds: number) => {
    counter.inc({ route, method, status_class: `${Math.floor(status / 100)}xx` });
    histogram.observe({ route }, seconds);
    requests.inc(route, method, status);
    duration.observe(route, seconds);
  };
  return { theirs, ours, record };
}

/** A small deterministic generator, so a failure names its seed. */
function random(seed: number): () => number {
  let state = seed;
  return () => {
    state = (state * 1_103_515_245 + 12_345) % 2 ** 31;
    return state / 2 ** 31;
  };
}

describe('request metrics render as prom-client renders them', () => {
  it('every bucket bound, just under and just over it, zero and past the last bound', async () => {
    const { theirs, ours, record } = registries();
    for (const bound of BUCKETS) {
      record('/v1/chat/completions', 'POST', 200, bound);
      record('/v1/chat/completions', 'POST', 200, bound * 0.999);
      record('/v1/chat/completions', 'POST', 200, bound * 1.001);
    }
    record('/v1/messages', 'POST', 413, 0);
    record('/v1/responses', 'POST', 502, 1_000);
    expect(await ours.metrics()).toBe(await theirs.metrics());
  });

  it.each([1, 2, 3, 4, 5])('random traffic over routes, methods and statuses (seed %i)', async (seed) => {
    const { theirs, ours, record } = registries();
    const next = random(seed);
    const routes = ['/v1/chat/completions', '/v1/responses', '/v1/messages', '/metrics', 'passthrough_models', 'unmatched', 'a "quoted" \\ route'];
    const statuses = [100, 200, 204, 301, 400, 401, 404, 413, 429, 500, 502, 503, 504];
    for (let i = 0; i < 500; i++) {
      const pick = <T>(list: T[]) => list[Math.floor(next() * list.length)];
      record(pick(routes), pick(['POST', 'GET', 'DELETE']), pick(statuses), next() ** 4 * 400);
    }
    expect(await ours.metrics()).toBe(await theirs.metrics());
  });

  it('in OpenMetrics text too, and with default labels', async () => {
    const { theirs, ours, record } = registries(true);
    theirs.setDefaultLabels({ instance: 'gw-1' });
    ours.setDefaultLabels({ instance: 'gw-1' });
    record('/v1/chat/completions', 'POST', 200, 0.02);
    record('/v1/messages', 'POST', 529, 7);
    expect(await ours.metrics()).toBe(await theirs.metrics());
    expect(await ours.metrics()).toMatch(/^gateway_http_requests_total\{/m);
    expect(await ours.getMetricsAsJSON()).toEqual(await theirs.getMetricsAsJSON());
  });

  it('a reset empties both alike', async () => {
    const { theirs, ours, record } = registries();
    record('/v1/chat/completions', 'POST', 200, 0.02);
    theirs.resetMetrics();
    ours.resetMetrics();
    record('/v1/messages', 'POST', 200, 0.5);
    expect(await ours.metrics()).toBe(await theirs.metrics());
  });
});
