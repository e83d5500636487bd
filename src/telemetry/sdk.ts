import { DiagLogLevel, diag, type DiagLogger } from '@opentelemetry/api';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { defaultResource, detectResources, envDetector, resourceFromAttributes } from '@opentelemetry/resources';
import { BatchSpanProcessor, NodeTracerProvider } from '@opentelemetry/sdk-trace-node';
import { ATTR_SERVICE_NAME, ATTR_SERVICE_VERSION } from '@opentelemetry/semantic-conventions';
import type { FastifyBaseLogger } from 'fastify';

/*
 * Loaded only when tracing is on. The SDK also reads its standard variables: OTEL_EXPORTER_OTLP_HEADERS and _TIMEOUT, OTEL_BSP_*,
 * OTEL_TRACES_SAMPLER (parent-based by default: a client's unsampled trace stays so), OTEL_RESOURCE_ATTRIBUTES.
 */

export interface SdkSettings {
  url: string;
  serviceName?: string;
  version: string;
  log: FastifyBaseLogger;
}

/** Shutdown waits this long at most for the last spans to go out (the collector may be gone). */
const SHUTDOWN_MS = 5_000;
/** An exporter that keeps failing says so once, then at most once a minute. */
const PROBLEM_EVERY_MS = 60_000;

/** What traces.ts hands back as its Telemetry (written out here: traces.ts imports this file). */
export function startSdk(s: SdkSettings): { shutdown(): Promise<void> } {
  diag.setLogger(problemsTo(s.log), DiagLogLevel.WARN);
  const resource = defaultResource()
    .merge(resourceFromAttributes({ [ATTR_SERVICE_NAME]: 'compaction-gateway' }))
    .merge(detectResources({ detectors: [envDetector] }))
    .merge(resourceFromAttributes({ [ATTR_SERVICE_VERSION]: s.version, ...(s.serviceName ? { [ATTR_SERVICE_NAME]: s.serviceName } : {}) }));
  const provider = new NodeTracerProvider({ resource, spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter({ url: s.url }))] });
  // The context manager (AsyncLocalStorage) and the W3C propagators (traceparent, baggage).
  provider.register();
  const shown = shownUrl(s.url);
  s.log.info({ traces: shown }, `traces go to ${shown} (OTLP/HTTP, JSON)`);
  return {
    shutdown: () => {
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<void>((resolve) => (timer = setTimeout(resolve, SHUTDOWN_MS).unref()));
      return Promise.race([provider.shutdown().catch(() => {}), late]).finally(() => clearTimeout(timer));
    },
  };
}

/** The SDK's own warnings and errors (an export that failed) as gateway log lines, rate-limited. */
function problemsTo(log: FastifyBaseLogger): DiagLogger {
  let last = -Infinity;
  const say = (message: string, ...args: unknown[]) => {
    const now = performance.now();
    if (now - last < PROBLEM_EVERY_MS) return;
    last = now;
    const detail = args
      .map((a) => (a instanceof Error ? a.message : typeof a === 'string' ? a : ''))
      .filter(Boolean)
      .join('; ');
    log.warn({ component: 'opentelemetry' }, `traces: ${message}${detail ? ` (${detail})` : ''}`);
  };
  const quiet = () => {};
  return { error: say, warn: say, info: quiet, debug: quiet, verbose: quiet };
}

function shownUrl(url: string): string {
  const u = new URL(url);
  return `${u.protocol}//${u.host}${u.pathname}`;
}
