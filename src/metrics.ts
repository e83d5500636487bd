import { Counter, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/** Every metric the gateway exports, on its own registry (so tests can build many gateways). */
export function createMetrics() {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });

  const requests = new Counter({
    name: 'gateway_http_requests_total',
    help: 'Requests answered by the gateway, by route and status class, counted when the response ends.',
    labelNames: ['route', 'method', 'status_class'] as const,
    registers: [registry],
  });
  const duration = new Histogram({
    name: 'gateway_http_request_duration_seconds',
    help: 'Time from the request reaching the gateway to the last byte of the response, by route.',
    labelNames: ['route'] as const,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300],
    registers: [registry],
  });
  const upstreamTtfb = new Histogram({
    name: 'gateway_upstream_ttfb_seconds',
    help: 'Time from sending a request upstream to receiving its response headers, by route.',
    labelNames: ['route'] as const,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300],
    registers: [registry],
  });

  const overlong = new Counter({
    name: 'gateway_overlong_rejections_total',
    help: 'Requests the upstream rejected as overlong (before any byte reached the client), by API and reason.',
    labelNames: ['api', 'reason'] as const,
    registers: [registry],
  });
  const compactions = new Counter({
    name: 'gateway_compactions_total',
    help: 'Rescues and proactive compactions, by API, strategy (summarize, fallback, clamp, truncation, none) and outcome.',
    labelNames: ['api', 'strategy', 'outcome'] as const,
    registers: [registry],
  });
  const replays = new Counter({
    name: 'gateway_replays_total',
    help: 'Replays of rescued requests, by API and result (success, upstream_error, still_overlong, failed).',
    labelNames: ['api', 'result'] as const,
    registers: [registry],
  });
  const compactionDuration = new Histogram({
    name: 'gateway_compaction_duration_seconds',
    help: 'Time to plan and condense one compaction, summarizer calls included.',
    buckets: [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 2, 5, 10, 30, 60, 120],
    registers: [registry],
  });
  const summarizerCalls = new Counter({
    name: 'gateway_summarizer_calls_total',
    help: 'Calls made to the summarizer LLM.',
    registers: [registry],
  });
  const summarizerFailures = new Counter({
    name: 'gateway_summarizer_failures_total',
    help: 'Summaries that failed and fell back to the deterministic digest, by kind.',
    labelNames: ['kind'] as const,
    registers: [registry],
  });
  const summarizerDuration = new Histogram({
    name: 'gateway_summarizer_duration_seconds',
    help: 'Time spent summarising one compaction (all its summarizer calls), successful or not.',
    buckets: [0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120],
    registers: [registry],
  });
  const compactionBytes = new Histogram({
    name: 'gateway_compaction_request_bytes',
    help: 'Request body size of compacted requests, before and after compaction.',
    labelNames: ['stage'] as const,
    buckets: [16e3, 64e3, 256e3, 1e6, 4e6, 16e6, 64e6],
    registers: [registry],
  });
  const compactionTokens = new Histogram({
    name: 'gateway_compaction_request_tokens',
    help: 'Estimated prompt tokens of compacted requests, before and after compaction.',
    labelNames: ['stage'] as const,
    buckets: [4e3, 16e3, 32e3, 64e3, 128e3, 256e3, 1e6, 4e6],
    registers: [registry],
  });

  return {
    registry,
    requests,
    duration,
    upstreamTtfb,
    overlong,
    compactions,
    replays,
    compactionDuration,
    summarizerCalls,
    summarizerFailures,
    summarizerDuration,
    compactionBytes,
    compactionTokens,
  };
}

export type Metrics = ReturnType<typeof createMetrics>;
