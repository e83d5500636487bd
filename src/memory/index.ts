import { createHash } from 'node:crypto';
import type { FastifyBaseLogger } from 'fastify';
import { Counter, Gauge, type Registry } from 'prom-client';
import type { Bounds } from '../compaction/target.js';
import type { Config } from '../config/schema.js';
import { sessionKey, spanDigests } from './fingerprint.js';
import { believed, loosened, type LearnedLimit } from './limits.js';
import { LocalStore, RedisStore, type MemoryEntry, type MemoryStore } from './store.js';

export type { LearnedLimit } from './limits.js';
export type { MemoryEntry } from './store.js';

/** A remembered compaction that this request extends. */
export interface Recalled {
  session: string;
  entry: MemoryEntry;
}

/** The request with a remembered span replaced by its summary. */
export interface RecalledView {
  items: unknown[];
  /** Leading items to keep as they are: the kept prefix, the summary, pinned items. */
  keepFirst: number;
  /** Maps an index in `items` (at or after keepFirst) back to the original request. */
  originalIndex: (i: number) => number;
  /** Where any item of `items` came from in the original request; null for the summary. */
  origin: (i: number) => number | null;
}

/**
 * What the gateway remembers between requests, per tenant (a hash of the request's credentials,
 * fingerprint.ts tenantOf): compactions per conversation and model (so a session that overflowed
 * once is not summarised from scratch every turn) and, per upstream and model, the limits
 * rejections stated (limits.ts says when they are believed). Every store failure is a miss: the
 * gateway keeps working without memory, and says so once.
 */
export class CompactionMemory {
  private storeDown = false;
  private readonly lookups: Counter<'result'>;
  private readonly saved: Counter;
  private readonly proactive: Counter;
  private readonly errors: Counter<'operation'>;
  private readonly limitTokens: Gauge<'model'>;
  private readonly limitBytes: Gauge<'model'>;

  constructor(
    private readonly store: MemoryStore,
    registry: Registry,
    private readonly log: FastifyBaseLogger,
  ) {
    this.lookups = new Counter({
      name: 'gateway_memory_lookups_total',
      help: 'Compaction memory lookups for requests to compact, by result (hit: a remembered summary was reused).',
      labelNames: ['result'] as const,
      registers: [registry],
    });
    this.saved = new Counter({
      name: 'gateway_memory_summarizer_calls_saved_total',
      help: 'Summarizer calls not made because a remembered summary was reused.',
      registers: [registry],
    });
    this.proactive = new Counter({
      name: 'gateway_proactive_compactions_total',
      help: 'Requests compacted before their first attempt (compaction.proactive), skipping a sure rejection.',
      registers: [registry],
    });
    this.errors = new Counter({
      name: 'gateway_memory_store_errors_total',
      help: 'Compaction memory store operations that failed (e.g. Redis down); each counts as a miss.',
      labelNames: ['operation'] as const,
      registers: [registry],
    });
    this.limitTokens = new Gauge({
      name: 'gateway_learned_context_limit_tokens',
      help: 'Context window a rejection stated, per model: the last one learned, by any tenant (each tenant keeps its own).',
      labelNames: ['model'] as const,
      registers: [registry],
    });
    this.limitBytes = new Gauge({
      name: 'gateway_learned_body_limit_bytes',
      help: 'Request body limit a 413 stated, or the smallest body refused when none was stated, per model: the last one learned, by any tenant.',
      labelNames: ['model'] as const,
      registers: [registry],
    });
  }

  /** The newest remembered compaction whose span this request repeats exactly, if any. */
  async recall(tenant: string, upstream: string, api: string, model: string, items: readonly unknown[], fixedEnd: number): Promise<Recalled | null> {
    const session = this.session(tenant, upstream, api, model, items, fixedEnd);
    const entries = await this.guard('read', () => this.store.entries(session), []);
    const after = items.length - fixedEnd;
    // A span must leave something after it: the request the agent added since.
    const usable = entries.filter((e) => e.spanLength < after).sort((a, b) => b.spanLength - a.spanLength);
    if (usable.length === 0) return null;
    const digests = spanDigests(items, fixedEnd, usable.map((e) => e.spanLength));
    const entry = usable.find((e, i) => digests[i] === e.spanDigest);
    return entry ? { session, entry } : null;
  }

  countLookup(hit: Recalled | null): void {
    this.lookups.inc({ result: hit ? 'hit' : 'miss' });
    if (hit) this.saved.inc(hit.entry.summarizerCalls);
  }

  countProactive(): void {
    this.proactive.inc();
  }

  /** Remembers what a new summary stands for: the span of `items` after the kept prefix, by digest. */
  async remember(session: string, tenant: string, items: readonly unknown[], fixedEnd: number, entry: Omit<MemoryEntry, 'spanDigest'>): Promise<void> {
    const [spanDigest] = spanDigests(items, fixedEnd, [entry.spanLength]);
    if (!spanDigest) return;
    await this.guard('write', async () => {
      await this.store.remember(session, { ...entry, spanDigest });
      await this.store.markTenant(tenant);
    }, undefined);
  }

  /** Whether anything is remembered for this tenant: only then is a request read before its first attempt. */
  async knowsTenant(tenant: string): Promise<boolean> {
    return this.guard('read', () => this.store.hasTenant(tenant), false);
  }

  /** False when no tenant can have anything remembered: the request need not even name its tenant. */
  mayKnowTenants(): boolean {
    return this.store.mayHaveTenants();
  }

  /** `upstream`: the upstream's memory key (its name and URL; upstreams.ts), so no two upstreams share what is remembered. */
  session(tenant: string, upstream: string, api: string, model: string, items: readonly unknown[], fixedEnd: number): string {
    return sessionKey(tenant, upstream, api, model, items, fixedEnd);
  }

  /** What rejections taught about this tenant's requests to this upstream and model, as believed for a request of `bytes`. */
  async limitFor(tenant: string, upstream: string, model: string, bytes: number): Promise<Bounds | undefined> {
    return believed(await this.guard('read', () => this.store.limit(limitKey(tenant, upstream, model)), undefined), bytes);
  }

  /** Adds a refusal's lesson (limits.ts lessonOf); the tenant is marked, so its accepted requests can loosen it. */
  async learn(tenant: string, upstream: string, model: string, lesson: LearnedLimit): Promise<void> {
    const key = limitKey(tenant, upstream, model);
    await this.guard('write', async () => {
      await this.store.learn(key, lesson);
      await this.store.markTenant(tenant);
    }, undefined);
    const known = await this.guard('read', () => this.store.limit(key), undefined);
    const bytes = known?.limitBytes ?? known?.refusedBytes;
    if (known?.limitTokens) this.limitTokens.set({ model }, known.limitTokens);
    if (bytes) this.limitBytes.set({ model }, bytes);
  }

  /** A request of `bytes` was accepted: whatever it disproves of what was learned is dropped. */
  async accepted(tenant: string, upstream: string, model: string, bytes: number): Promise<void> {
    const key = limitKey(tenant, upstream, model);
    const known = await this.guard('read', () => this.store.limit(key), undefined);
    const rest = known ? loosened(known, bytes) : null;
    if (!rest) return;
    await this.guard('write', () => this.store.replaceLimit(key, rest), undefined);
    this.log.info({ model, bytes, was: known, now: rest }, `an accepted request of ${bytes} bytes disproved a limit learned for its model; dropped`);
  }

  close(): Promise<void> {
    return this.store.close();
  }

  private async guard<T>(operation: 'read' | 'write', fn: () => Promise<T>, fallback: T): Promise<T> {
    try {
      const value = await fn();
      if (this.storeDown) {
        this.storeDown = false;
        this.log.info('compaction memory store is reachable again');
      }
      return value;
    } catch (err) {
      this.errors.inc({ operation });
      if (!this.storeDown) {
        this.storeDown = true;
        this.log.warn({ err: (err as Error).message }, 'compaction memory store failed; going on without memory until it is back');
      }
      return fallback;
    }
  }
}

/** The items that stand for a remembered span: its summary, or the provider's window (entries from before hold one item). */
export function summaryItemsOf(entry: MemoryEntry): unknown[] {
  return Array.isArray(entry.summaryItems) ? entry.summaryItems : [entry.summary];
}

/** The request as it reads with a remembered span replaced by its summary (pinned items kept). */
export function applyRecalled(items: readonly unknown[], fixedEnd: number, entry: MemoryEntry): RecalledView {
  const summary = summaryItemsOf(entry);
  const pinned = entry.pinnedOffsets.map((o) => items[fixedEnd + o]);
  const pinsAt = fixedEnd + summary.length;
  const keepFirst = pinsAt + pinned.length;
  const rest = fixedEnd + entry.spanLength;
  const originalIndex = (i: number) => rest + (i - keepFirst);
  return {
    items: [...items.slice(0, fixedEnd), ...summary, ...pinned, ...items.slice(rest)],
    keepFirst,
    originalIndex,
    origin: (i) => (i < fixedEnd ? i : i < pinsAt ? null : i < keepFirst ? fixedEnd + entry.pinnedOffsets[i - pinsAt] : originalIndex(i)),
  };
}

export function createMemory(config: Readonly<Config>, registry: Registry, log: FastifyBaseLogger): CompactionMemory | null {
  if (!config.memory.enabled) return null;
  const store = config.memory.redisUrl
    ? new RedisStore(config.memory.redisUrl, config.memory.ttlSeconds)
    : new LocalStore(config.memory.maxBytes, config.memory.ttlSeconds);
  return new CompactionMemory(store, registry, log);
}

/** One key per tenant, upstream and model, of fixed length: a model name is the client's string. */
function limitKey(tenant: string, upstream: string, model: string): string {
  return createHash('sha256').update(`${tenant}\0${upstream}\0${model.length}:${model}`).digest('hex').slice(0, 40);
}
