import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { APIS } from '../dialects/types.js';

// Label values at 0 before the first event: a series that appears on its first increment makes `rate()` and `increase()` miss it.
// Kept in step with the code that counts them.
const OVERLONG_REASONS = ['context_length', 'body_too_large'] as const;
const REPLAY_RESULTS = ['success', 'upstream_error', 'still_overlong', 'failed'] as const;
/** How a rescue of a refusal ended for the client: saved, an error the gateway could not spare it, or no rescue asked for. */
const RESCUE_OUTCOMES = ['replayed', 'replay_failed', 'not_shrunk', 'shed', 'disabled'] as const;
const SUMMARIZER_FAILURE_KINDS = ['timeout', 'unreachable', 'rejected', 'overlong', 'bad_response', 'aborted'] as const;
/** Summarizer tokens by direction, and whether the answers reported them or they were estimated from sizes. */
const TOKEN_DIRECTIONS = ['input', 'output'] as const;
const TOKEN_SOURCES = ['usage', 'estimated'] as const;

const MEMORY_OPERATIONS = ['read', 'write'] as const;
/** How a wait for another request's compaction of the same conversation ended. */
const LEASE_WAIT_RESULTS = ['reused', 'timed_out'] as const;
/** A binding refusal of a request the gateway rewrote (its own doing), or of one it passed on as sent. */
const BINDING_REQUESTS = ['compacted', 'client'] as const;
/** Bound provider state (signed thinking, reasoning items) the gateway stripped, or the upstream said it dropped. */
const BOUND_ACTIONS = ['stripped', 'dropped'] as const;
/** Where a silent truncation was caught: in a held answer (rescued), or in a stream already relayed. */
const TRUNCATION_STAGES = ['held', 'streamed'] as const;
/** Where a context window known before sending came from (upstream/windows.ts). */
const WINDOW_SOURCES = ['declared', 'discovered', 'observed'] as const;
/** The compactions that can happen: a strategy that compacted, or none when nothing was. */
const COMPACTION_LABELS = [
  ...combinations({ api: APIS, strategy: ['mask', 'summarize', 'fallback'], outcome: ['replayed', 'replay_failed', 'compacted'] }),
  ...combinations({ api: ['responses'], strategy: ['provider'], outcome: ['replayed', 'replay_failed', 'compacted'] }),
  ...combinations({ api: APIS, strategy: ['clamp', 'truncation'], outcome: ['replayed', 'replay_failed'] }),
  ...combinations({ api: APIS, strategy: ['none'], outcome: ['not_shrunk', 'disabled', 'replay_failed', 'shed'] }),
];

/**
 * Three gauges named `_total` that `promtool check metrics` rejects (only counters may); `sum(nodejs_active_handles)` gives their
 * values.
 */
const MISNAMED_DEFAULTS = ['nodejs_active_handles_total', 'nodejs_active_requests_total', 'nodejs_active_resources_total'];

const LATENCY_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300];

/** Whose summarizer spend a series counts: the upstream of the request compacted, and the model its summarizer calls named. */
export interface SummarizerLabels {
  upstream: string;
  model: string;
}

/**
 * On its own registry (tests build many gateways). `upstream` labels are the config's names, each started at zero; `model` on the
 * summarizer's series: the config's models start at zero, a request's own when first summarised with.
 */
export function createMetrics(
  upstreamNames: readonly string[] = ['default'],
  summarizers: readonly SummarizerLabels[] = [],
  options: MetricsOptions = {},
) {
  // A tenant's model names are its own business: on a /metrics anyone may read, one value stands for them all.
  const modelLabel = (): ((model: string) => string) =>
    options.modelNames === false ? () => HIDDEN_MODEL : boundedLabel(CLIENT_LABEL_LIMIT);
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  for (const name of MISNAMED_DEFAULTS) registry.removeSingleMetric(name);

  // The series every request touches, behind the calls the server and the rescue make (typed, positional).
  const requestsTotal = new Counter({
    name: 'gateway_http_requests_total',
    help: "Requests answered by the gateway, by route, status class and the upstream it was routed to (none for the gateway's own answers), counted when the response ends.",
    labelNames: ['route', 'method', 'status_class', 'upstream'] as const,
    registers: [registry],
  });
  const requestDuration = new Histogram({
    name: 'gateway_http_request_duration_seconds',
    help: 'Time from the request reaching the gateway to the last byte of the response, by route.',
    labelNames: ['route'] as const,
    buckets: LATENCY_BUCKETS,
    registers: [registry],
  });
  const ttfb = new Histogram({
    name: 'gateway_upstream_ttfb_seconds',
    help: 'Time from sending a request upstream to receiving its response headers, by route and upstream.',
    labelNames: ['route', 'upstream'] as const,
    buckets: LATENCY_BUCKETS,
    registers: [registry],
  });
  const requests = {
    /** `upstream` undefined for the gateway's own answers: the series then has no upstream label. */
    inc(route: string, method: string, status: number, upstream?: string): void {
      const status_class = `${Math.trunc(status / 100)}xx`;
      requestsTotal.inc(upstream === undefined ? { route, method, status_class } : { route, method, status_class, upstream });
    },
  };
  const duration = {
    observe(route: string, seconds: number): void {
      requestDuration.observe({ route }, seconds);
    },
  };
  const upstreamTtfb = {
    observe(route: string, seconds: number, upstream: string): void {
      ttfb.observe({ route, upstream }, seconds);
    },
  };

  const overlong = new Counter({
    name: 'gateway_overlong_rejections_total',
    help: 'Requests the upstream rejected as overlong (before any byte reached the client), by API, reason and upstream.',
    labelNames: ['api', 'reason', 'upstream'] as const,
    registers: [registry],
  });
  const compactions = new Counter({
    name: 'gateway_compactions_total',
    help: 'Rescues and proactive compactions, by API, strategy (mask, summarize, fallback, provider, clamp, truncation, none), outcome and upstream.',
    labelNames: ['api', 'strategy', 'outcome', 'upstream'] as const,
    registers: [registry],
  });
  const truncations = new Counter({
    name: 'gateway_truncations_total',
    help: 'Answers to requests the upstream silently cut (its prompt count far below what was sent), by API, upstream and stage: held (rescued before any byte reached the client) or streamed (relayed as it was; the next turn is compacted ahead).',
    labelNames: ['api', 'upstream', 'stage'] as const,
    registers: [registry],
  });
  const windowCompactions = new Counter({
    name: 'gateway_window_compactions_total',
    help: "Requests made to fit their model's known context window before their first attempt, by API, upstream and where the window came from (declared, discovered, observed).",
    labelNames: ['api', 'upstream', 'source'] as const,
    registers: [registry],
  });
  const rescues = new Counter({
    name: 'gateway_rescues_total',
    help: "Rescues of overlong refusals and of answers the upstream silently cut, once each ended, by API, outcome and upstream: replayed (the client got the replay's answer), replay_failed, not_shrunk, shed (the client got an error the gateway could not spare it), disabled (opted out, or compaction off).",
    labelNames: ['api', 'outcome', 'upstream'] as const,
    registers: [registry],
  });
  const replays = new Counter({
    name: 'gateway_replays_total',
    help: 'Replays of rescued requests, by API, result (success, upstream_error, still_overlong, failed) and upstream.',
    labelNames: ['api', 'result', 'upstream'] as const,
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
    help: "Calls made to the summarizer LLM, by upstream (of the request compacted) and model (the summarizer calls').",
    labelNames: ['upstream', 'model'] as const,
    registers: [registry],
  });
  const summarizerFailures = new Counter({
    name: 'gateway_summarizer_failures_total',
    help: 'Summaries that failed and fell back to the deterministic digest, by kind, upstream and model.',
    labelNames: ['kind', 'upstream', 'model'] as const,
    registers: [registry],
  });
  const summarizerDuration = new Histogram({
    name: 'gateway_summarizer_duration_seconds',
    help: 'Time spent summarising one compaction (all its summarizer calls), successful or not, by upstream and model.',
    labelNames: ['upstream', 'model'] as const,
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
  const summarizerTokens = new Counter({
    name: 'gateway_summarizer_tokens_total',
    help: "Tokens the summarizer's calls took, by direction (input, output), source (usage: as its answers reported; estimated: from sizes, where an answer reported none or the call failed), upstream and model.",
    labelNames: ['direction', 'source', 'upstream', 'model'] as const,
    registers: [registry],
  });
  const removedBytes = new Counter({
    name: 'gateway_compaction_removed_bytes_total',
    help: 'Request body bytes compactions removed (before minus after), by API.',
    labelNames: ['api'] as const,
    registers: [registry],
  });
  const removedTokens = new Counter({
    name: 'gateway_compaction_removed_tokens_total',
    help: 'Estimated prompt tokens compactions removed (before minus after), by API.',
    labelNames: ['api'] as const,
    registers: [registry],
  });
  const compactionTokens = new Histogram({
    name: 'gateway_compaction_request_tokens',
    help: 'Estimated prompt tokens of compacted requests, before and after compaction.',
    labelNames: ['stage'] as const,
    buckets: [4e3, 16e3, 32e3, 64e3, 128e3, 256e3, 1e6, 4e6],
    registers: [registry],
  });

  const bindingRefusals = new Counter({
    name: 'gateway_binding_refusals_total',
    help: 'Upstream refusals of signed state bound to a changed prefix (preserved thinking), by API and request (compacted: the gateway rewrote it; client: sent as the client sent it).',
    labelNames: ['api', 'request'] as const,
    registers: [registry],
  });
  const boundBlocks = new Counter({
    name: 'gateway_bound_blocks_total',
    help: 'Bound provider state in requests the gateway rewrote: thinking blocks it stripped, and blocks or reasoning items the upstream reported dropping, by API.',
    labelNames: ['api', 'action'] as const,
    registers: [registry],
  });

  const rescueBudget = new Gauge({
    name: 'gateway_rescue_budget_bytes',
    help: 'Memory rescues hold at once, bodies included, estimated before each body is parsed; waiting ones count their bodies (state in_use), and the most they may hold (state limit, compaction.rescueBudgetBytes); past it a rescue waits, then is shed.',
    labelNames: ['state'] as const,
    registers: [registry],
  });

  const perUpstream = (sets: readonly LabelSet[]) => sets.flatMap((set) => upstreamNames.map((upstream) => ({ ...set, upstream })));
  startAtZero(overlong, perUpstream(combinations({ api: APIS, reason: OVERLONG_REASONS })));
  startAtZero(bindingRefusals, combinations({ api: APIS, request: BINDING_REQUESTS }));
  startAtZero(boundBlocks, combinations({ api: APIS, action: BOUND_ACTIONS }));
  startAtZero(compactions, perUpstream(COMPACTION_LABELS));
  startAtZero(truncations, perUpstream(combinations({ api: APIS, stage: TRUNCATION_STAGES })));
  startAtZero(windowCompactions, perUpstream(combinations({ api: APIS, source: WINDOW_SOURCES })));
  startAtZero(replays, perUpstream(combinations({ api: APIS, result: REPLAY_RESULTS })));
  startAtZero(rescues, perUpstream(combinations({ api: APIS, outcome: RESCUE_OUTCOMES })));
  const summarizerModel = modelLabel();
  const seenSummarizers = new Set<string>();
  // The config's summarizer models are the operator's: shown whatever options.modelNames says.
  const configured = new Set(summarizers.map((s) => s.model));
  const summarizerLabels = (upstream: string, model: string): SummarizerLabels => {
    const by = { upstream, model: configured.has(model) ? model : summarizerModel(model || 'unknown') };
    const key = `${by.upstream}\0${by.model}`;
    if (seenSummarizers.has(key)) return by;
    seenSummarizers.add(key);
    summarizerCalls.inc(by, 0);
    summarizerDuration.zero(by);
    startAtZero(
      summarizerFailures,
      combinations({ kind: SUMMARIZER_FAILURE_KINDS }).map((set) => ({ ...set, ...by })),
    );
    startAtZero(
      summarizerTokens,
      combinations({ direction: TOKEN_DIRECTIONS, source: TOKEN_SOURCES }).map((set) => ({ ...set, ...by })),
    );
    return by;
  };
  for (const { upstream, model } of summarizers) summarizerLabels(upstream, model);
  startAtZero(removedBytes, combinations({ api: APIS }));
  startAtZero(removedTokens, combinations({ api: APIS }));

  let memory: MemoryMetrics | undefined;
  return {
    registry,
    /** The compaction memory's metrics, registered the first time memory asks (none when it is off). */
    memory: (): MemoryMetrics => (memory ??= memoryMetrics(registry, modelLabel)),
    requests,
    duration,
    upstreamTtfb,
    overlong,
    compactions,
    rescues,
    replays,
    truncations,
    windowCompactions,
    compactionDuration,
    summarizerLabels,
    summarizerCalls,
    summarizerFailures,
    summarizerDuration,
    compactionBytes,
    compactionTokens,
    summarizerTokens,
    removedBytes,
    removedTokens,
    bindingRefusals,
    boundBlocks,
    rescueBudget,
  };
}

export type Metrics = ReturnType<typeof createMetrics>;

type LabelSet = Record<string, string>;

/** Every combination of the given label values: `{ a: ['1', '2'], b: ['x'] }` -> `[{a:'1',b:'x'}, {a:'2',b:'x'}]`. */
export function combinations(values: Record<string, readonly string[]>): LabelSet[] {
  let sets: LabelSet[] = [{}];
  for (const [name, options] of Object.entries(values)) {
    sets = sets.flatMap((set) => options.map((value) => ({ ...set, [name]: value })));
  }
  return sets;
}

/** Makes each labelled series exist at 0 from the start (see the label lists above). */
function startAtZero(counter: Counter<string>, labelSets: readonly LabelSet[]): void {
  for (const labels of labelSets) counter.inc(labels, 0);
}

/** The longest client-chosen label value kept whole. */
export const LABEL_MAX_CHARS = 100;

/** Distinct client-chosen values a label keeps before the rest become "other". */
export const CLIENT_LABEL_LIMIT = 50;

export interface MetricsOptions {
  /** Whether `model` labels carry model names (server.ts: when /metrics asks for a key, or auth.metricsModelNames); else each reads HIDDEN_MODEL. */
  modelNames?: boolean;
}

const HIDDEN_MODEL = 'hidden';

/** A gauge by model, the request's `model` (a client's choice): its label values are bounded (boundedLabel). */
interface ModelGauge {
  set(model: string, value: number): void;
}

function modelGauge(gauge: Gauge<'model'>, bound: (model: string) => string): ModelGauge {
  return { set: (model, value) => gauge.set({ model: bound(model) }, value) };
}

export interface MemoryMetrics {
  lookups: Counter<'result'>;
  summarizerCallsSaved: Counter;
  proactive: Counter;
  storeErrors: Counter<'operation'>;
  learnedContextLimit: ModelGauge;
  learnedBodyLimit: ModelGauge;
  leaseWaits: Counter<'result'>;
}

function memoryMetrics(registry: Registry, modelLabel: () => (model: string) => string): MemoryMetrics {
  const lookups = new Counter({
    name: 'gateway_memory_lookups_total',
    help: 'Compaction memory lookups for requests to compact, by result (hit: a remembered summary was reused).',
    labelNames: ['result'] as const,
    registers: [registry],
  });
  const summarizerCallsSaved = new Counter({
    name: 'gateway_memory_summarizer_calls_saved_total',
    help: 'Summarizer calls not made because a remembered summary was reused.',
    registers: [registry],
  });
  const proactive = new Counter({
    name: 'gateway_proactive_compactions_total',
    help: 'Requests compacted before their first attempt (compaction.proactive), skipping a sure rejection.',
    registers: [registry],
  });
  const storeErrors = new Counter({
    name: 'gateway_memory_store_errors_total',
    help: 'Compaction memory store operations that failed (e.g. Redis down); each counts as a miss.',
    labelNames: ['operation'] as const,
    registers: [registry],
  });
  const contextLimit = new Gauge({
    name: 'gateway_learned_context_limit_tokens',
    help: 'Context window a rejection stated, per model: the last one learned, by any tenant (each tenant keeps its own).',
    labelNames: ['model'] as const,
    registers: [registry],
  });
  const bodyLimit = new Gauge({
    name: 'gateway_learned_body_limit_bytes',
    help: 'Request body limit a 413 stated, or the smallest body refused when none was stated, per model: the last one learned, by any tenant.',
    labelNames: ['model'] as const,
    registers: [registry],
  });
  const leaseWaits = new Counter({
    name: 'gateway_memory_lease_waits_total',
    help: 'Compactions that waited for another request (any replica) compacting the same conversation, by result (reused: went on after it, with what it remembered; timed_out: compacted without remembering).',
    labelNames: ['result'] as const,
    registers: [registry],
  });
  startAtZero(leaseWaits, combinations({ result: LEASE_WAIT_RESULTS }));
  startAtZero(storeErrors, combinations({ operation: MEMORY_OPERATIONS }));
  return {
    lookups,
    summarizerCallsSaved,
    proactive,
    storeErrors,
    learnedContextLimit: modelGauge(contextLimit, modelLabel()),
    learnedBodyLimit: modelGauge(bodyLimit, modelLabel()),
    leaseWaits,
  };
}

/**
 * For client-chosen values (model names): the first `max` distinct ones kept, later ones "other", so no client grows the series
 * unbounded.
 */
export function boundedLabel(max: number): (value: string) => string {
  const seen = new Set<string>();
  return (raw) => {
    // A model name is a few dozen characters; a longer value is cut, so no label can be megabytes.
    const value = raw.length > LABEL_MAX_CHARS ? raw.slice(0, LABEL_MAX_CHARS) : raw;
    if (seen.has(value)) return value;
    if (seen.size >= max) return 'other';
    seen.add(value);
    return value;
  };
}
