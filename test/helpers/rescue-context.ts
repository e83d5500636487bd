import pino from 'pino';
import type { Dispatcher } from 'undici';
import type { Config } from '../../src/config/schema.js';
import { chat } from '../../src/dialects/chat.js';
import type { Dialect } from '../../src/dialects/types.js';
import type { CompactionMemory } from '../../src/memory/index.js';
import { RescueBudget } from '../../src/rescue/budget.js';
import type { RescueContext } from '../../src/rescue/context.js';
import type { IncomingRequest } from '../../src/rescue/request.js';
import { createMetrics, type Metrics } from '../../src/telemetry/metrics.js';
import { ClientGone } from '../../src/upstream/client-gone.js';
import { resolveUpstreams } from '../../src/upstream/upstreams.js';
import { Windows } from '../../src/upstream/windows.js';

/**
 * What a route hands the rescue core for one request to the first upstream of `config`, for the
 * tests that drive `serve` directly. `path` follows the upstream's base path; `headers` are the
 * ones forwarded besides the JSON content type.
 */
export function rescueContext(o: {
  config: Config;
  dispatcher: Dispatcher;
  incoming: IncomingRequest;
  headers: Record<string, string>;
  clientHeaders?: Record<string, string>;
  memory?: CompactionMemory | null;
  metrics?: Metrics;
  dialect?: Dialect;
  path?: string;
  log?: RescueContext['log'];
  gone?: ClientGone;
  notes?: RescueContext['notes'];
}): RescueContext {
  const upstreams = resolveUpstreams(o.config);
  const upstream = upstreams.all[0];
  return {
    deps: {
      config: o.config,
      dispatcher: o.dispatcher,
      upstreams,
      metrics: o.metrics ?? createMetrics(),
      memory: o.memory ?? null,
      budget: new RescueBudget(64 * 2 ** 20),
      windows: new Windows(null),
    },
    upstream,
    dialect: o.dialect ?? chat,
    path: `${upstream.target.basePath}${o.path ?? '/chat/completions'}`,
    incoming: o.incoming,
    headers: { 'content-type': 'application/json', ...o.headers },
    clientHeaders: { ...o.clientHeaders },
    log: o.log ?? pino({ level: 'silent' }),
    gone: o.gone ?? new ClientGone(),
    notes: o.notes ?? {},
  };
}
