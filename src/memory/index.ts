import { createHash, randomUUID } from 'node:crypto';
import type { FastifyBaseLogger } from 'fastify';
import type { Bounds } from '../compaction/size-target.js';
import type { Config } from '../config/schema.js';
import type { MemoryMetrics, Metrics } from '../telemetry/metrics.js';
import { sessionKey, spanBytes, spanDigests } from './fingerprint.js';
import { believed, disprovedFrom, loosened, type LearnedLimit } from './limits.js';
import { RedisStore } from './redis.js';
import { redisTargetOf } from './redis-target.js';
import { LocalStore, NO_REACH, type MemoryEntry, type MemoryStore, type Reach } from './store.js';

export type { LearnedLimit } from './limits.js';
export type { MemoryEntry, Reach } from './store.js';

/** Whom a request's memory belongs to and what it is keyed by: worked out once a request (rescue/identity.ts). */
export interface Who {
  tenant: string;
  /** The upstream's memory key (its name and URL; upstreams.ts), so no two upstreams share what is remembered. */
  upstream: string;
  api: string;
  /** Undefined when the request names none: then nothing is learned or believed for it. */
  model?: string;
  agentSession?: string;
}

/** One conversation of a request as memory keys it: whose it is, and its session (fingerprint.ts sessionKey). */
export interface Thread {
  readonly who: Who;
  readonly session: string;
  readonly items: readonly unknown[];
  /** Where the kept prefix ends: a remembered span starts there. */
  readonly fixedEnd: number;
}

/** What memory remembers for a request: the compaction it extends, and what was learned of its model's limits, as believed for its size. */
export interface Remembered {
  entry: MemoryEntry | null;
  bounds: Bounds | undefined;
}
/**
 * The right to compact a conversation and remember what came of it, held by one request at a time
 * across every replica sharing the store (CompactionMemory.lease).
 */
export interface Lease {
  readonly session: string;
  readonly token: string;
  /** Frees it if still this one's (never another's). */
  release(): Promise<void>;
}

/**
 * A request that repeats a remembered span has at least the span's bytes as its digests read
 * them (fingerprint.ts spanBytes); this share of them leaves room for the rare number
 * written shorter than JavaScript writes it (`1e5`). Should one still be taken for smaller, it
 * is only not compacted ahead: its refusal is rescued, and the rescue recalls the summary.
 */
const EXTENDING_SHARE = 0.9;
/** How long a lease lasts unrenewed: a holder that crashed frees it within this. */
const LEASE_TTL_MS = 10_000;
/** How long the store is left alone after an operation failed slowly (CompactionMemory.guard). */
const STORE_PAUSE_MS = 1_000;
const SLOW_FAILURE_MS = 100;
/** How often a holder renews its lease while its compaction runs (summaries may take a minute). */
const LEASE_RENEW_MS = 3_000;

/**
 * What the gateway remembers between requests, per tenant (a hash of the request's credentials,
 * fingerprint.ts tenantOf): compactions per conversation and model (so a session that overflowed
 * once is not summarised from scratch every turn) and, per upstream and model, the limits
 * rejections stated (limits.ts says when they are believed). Every store failure is a miss: the
 * gateway keeps working without memory, and says so once.
 */
export class CompactionMemory {
  private storeDown = false;
  private pausedUntil = 0;
  /**
   * For a store of this process alone (what another replica remembers, it cannot know): the
   * smallest request that could extend a compaction remembered here (most of the bytes of its
   * span: EXTENDING_SHARE), and the smallest accepted request that could disprove a limit learned
   * here. Each only falls: an entry that expires leaves it where it was (a lookup too many, never one too few).
   */
  private smallestExtending = Infinity;
  private smallestDisproving = Infinity;

  constructor(
    private readonly store: MemoryStore,
    private readonly metrics: MemoryMetrics,
    private readonly log: FastifyBaseLogger,
  ) {}

  /**
   * What is remembered for a request of `bytes`, in one read: given its conversation, the newest
   * remembered compaction whose span it repeats exactly; and the learned limits believed for it.
   */
  async remembered(of: Who | Thread, bytes: number): Promise<Remembered> {
    const thread = 'session' in of ? of : null;
    const who = thread ? thread.who : (of as Who);
    const key = who.model === undefined ? null : limitKey(who.tenant, who.upstream, who.model);
    const read = await this.guard('read', () => this.store.recall(thread?.session ?? null, key), { entries: [] });
    return { entry: thread ? repeated(thread, read.entries) : null, bounds: believed(read.limit, bytes) };
  }

  countLookup(hit: MemoryEntry | null): void {
    this.metrics.lookups.inc({ result: hit ? 'hit' : 'miss' });
    if (hit) this.metrics.summarizerCallsSaved.inc(hit.summarizerCalls);
  }

  countProactive(): void {
    this.metrics.proactive.inc();
  }

  /**
   * Remembers what a new summary stands for (the span of the thread's items after the kept
   * prefix, by digest), while `lease` is still the conversation's: a lease lost meanwhile (expired,
   * or gone in a failover and taken by another replica) writes nothing.
   */
  async remember(lease: Lease, thread: Thread, entry: Omit<MemoryEntry, 'spanDigest'>): Promise<void> {
    const { items, fixedEnd } = thread;
    const [spanDigest] = spanDigests(items, fixedEnd, [entry.spanLength]);
    if (!spanDigest) return;
    const extending = Math.floor(spanBytes(items, fixedEnd, entry.spanLength) * EXTENDING_SHARE);
    // Before it is written: a request that extends it is looked up from the moment it can be recalled.
    this.smallestExtending = Math.min(this.smallestExtending, extending);
    const written = await this.guard(
      'write',
      async () => {
        const kept = await this.store.remember(thread.session, { ...entry, spanDigest }, lease.token);
        if (kept) await this.store.markTenant(thread.who.tenant, { extending });
        return kept;
      },
      false,
    );
    if (!written && !this.storeDown)
      this.log.info(
        { session: thread.session },
        "the conversation's lease was lost while it was compacted (it expired, or Redis failed over); what it made is not remembered",
      );
  }

  /**
   * The conversation's lease: only its holder compacts the conversation and remembers the result.
   * While another request holds it (on any replica), waits for it up to `waitMs` (what its
   * summary may take), and then takes it: the holder's summary is remembered by then, and the
   * caller recalls it. Null when the wait ran out, the client left, or the store failed: the
   * caller compacts on its own and remembers nothing, so two never both write one conversation.
   */
  async lease(thread: Thread, waitMs: number, signal?: AbortSignal): Promise<Lease | null> {
    const { session } = thread;
    const until = performance.now() + waitMs;
    let waited = false;
    // Bounded by time; the count is a second bound should the clock not move.
    for (let round = 0; round < 10_000; round++) {
      const token = randomUUID();
      const taken = await this.guard('write', () => this.store.acquire(session, token, LEASE_TTL_MS), null);
      if (taken === null) return null;
      if (taken) {
        if (waited) this.metrics.leaseWaits.inc({ result: 'reused' });
        return this.held(session, token);
      }
      const left = until - performance.now();
      if (left <= 0 || signal?.aborted) break;
      if (!waited) this.log.info({ session, waitMs }, 'another request is compacting this conversation; waiting for its summary');
      waited = true;
      await this.guard('read', () => this.store.whenFree(session, left, signal), undefined);
    }
    // Not waited for (waitMs 0): the caller only takes a lease that is free.
    if (!waited) return null;
    this.metrics.leaseWaits.inc({ result: 'timed_out' });
    if (!signal?.aborted)
      this.log.info(
        { session, waitMs },
        `another request was still compacting this conversation after ${waitMs} ms; compacting it here too, without remembering the result`,
      );
    return null;
  }

  /** A lease taken: renewed while held, so a long summary keeps it and a crashed holder's expires. */
  private held(session: string, token: string): Lease {
    const renewing = setInterval(() => void this.store.renew(session, token, LEASE_TTL_MS).catch(() => {}), LEASE_RENEW_MS);
    renewing.unref();
    return {
      session,
      token,
      release: async () => {
        clearInterval(renewing);
        await this.guard('write', () => this.store.release(session, token), undefined);
      },
    };
  }

  /**
   * What the tenant's memory could concern (store.ts Reach), in one read: a request smaller than
   * both sizes extends nothing remembered and disproves nothing learned, and is not read for them.
   */
  async reachOf(tenant: string): Promise<Reach> {
    return (await this.guard('read', () => this.store.reachOf(tenant), undefined)) ?? NO_REACH;
  }

  /**
   * False when a request of `bytes` can extend no remembered compaction: nothing is remembered, or
   * (a store of this process alone) the request is smaller than every remembered span, so it
   * cannot repeat one. Then it is not read, its tenant not named, nothing looked up: a learned
   * limit alone never reads a request before its first attempt (rescue/proactive.ts).
   */
  mayRecall(bytes: number): boolean {
    return this.store.mayHaveTenants() && (this.store.shared || bytes >= this.smallestExtending);
  }

  /**
   * False when an accepted request of `bytes` can disprove no learned limit (limits.ts loosened):
   * nothing learned, or (a store of this process alone) the request is smaller than what would
   * disprove the least of them. Then its acceptance is not noted.
   */
  mayLoosen(bytes: number): boolean {
    return this.store.mayHaveTenants() && (this.store.shared || bytes >= this.smallestDisproving);
  }

  thread(who: Who, items: readonly unknown[], fixedEnd: number): Thread {
    const session = sessionKey(who.tenant, who.upstream, who.api, who.model ?? '', items, fixedEnd, who.agentSession);
    return { who, session, items, fixedEnd };
  }

  /** Adds a refusal's lesson (limits.ts lessonOf); the tenant's reach says from what size an accepted request could loosen it. */
  async learn(who: Who, lesson: LearnedLimit): Promise<void> {
    if (who.model === undefined) return;
    const disproving = disprovedFrom(lesson);
    this.smallestDisproving = Math.min(this.smallestDisproving, disproving);
    const known = await this.guard(
      'write',
      async () => {
        const merged = await this.store.learn(limitKey(who.tenant, who.upstream, who.model!), lesson);
        await this.store.markTenant(who.tenant, { disproving });
        return merged;
      },
      undefined,
    );
    const bytes = known?.limitBytes ?? known?.refusedBytes;
    if (known?.limitTokens) this.metrics.learnedContextLimit.set(who.model, known.limitTokens);
    if (bytes) this.metrics.learnedBodyLimit.set(who.model, bytes);
  }

  async accepted(who: Who, bytes: number): Promise<void> {
    if (who.model === undefined) return;
    const key = limitKey(who.tenant, who.upstream, who.model);
    const known = await this.guard('read', () => this.store.limit(key), undefined);
    const rest = known ? loosened(known, bytes) : null;
    if (!rest) return;
    await this.guard('write', () => this.store.replaceLimit(key, rest), undefined);
    this.log.info(
      { model: who.model, bytes, was: known, now: rest },
      `an accepted request of ${bytes} bytes disproved a limit learned for its model; dropped`,
    );
  }

  close(): Promise<void> {
    return this.store.close();
  }

  /**
   * After an operation failed slowly (a timeout, a cluster retrying on nodes that are gone), the
   * store is left alone for STORE_PAUSE_MS: every operation is a miss at once, so a request does
   * not pay each of its operations' bounds in turn; then the next operation tries it again. A
   * quick failure (not connected yet: no offline queue) costs nothing and pauses nothing.
   */
  private async guard<T>(operation: 'read' | 'write', fn: () => Promise<T>, fallback: T): Promise<T> {
    if (performance.now() < this.pausedUntil) return fallback;
    const started = performance.now();
    try {
      const value = await fn();
      if (this.storeDown) {
        this.storeDown = false;
        this.log.info('compaction memory store is reachable again');
      }
      return value;
    } catch (err) {
      this.metrics.storeErrors.inc({ operation });
      // (A value that does not parse is that key's problem, not the store's.)
      if (performance.now() - started >= SLOW_FAILURE_MS && !(err instanceof SyntaxError))
        this.pausedUntil = performance.now() + STORE_PAUSE_MS;
      if (!this.storeDown) {
        this.storeDown = true;
        this.log.warn({ err: (err as Error).message }, 'compaction memory store failed; going on without memory until it is back');
      }
      return fallback;
    }
  }
}

export function createMemory(config: Readonly<Config>, metrics: Pick<Metrics, 'memory'>, log: FastifyBaseLogger): CompactionMemory | null {
  if (!config.memory.enabled) return null;
  const redis = redisTargetOf(config.memory);
  const store = redis ? new RedisStore(redis, config.memory.ttlSeconds) : new LocalStore(config.memory.maxBytes, config.memory.ttlSeconds);
  return new CompactionMemory(store, metrics.memory(), log);
}

/** The newest of `entries` whose span the thread repeats exactly, leaving the request's new turn after it. */
function repeated(thread: Thread, entries: readonly MemoryEntry[]): MemoryEntry | null {
  const after = thread.items.length - thread.fixedEnd;
  const usable = entries.filter((e) => e.spanLength < after).sort((a, b) => b.spanLength - a.spanLength);
  if (usable.length === 0) return null;
  const digests = spanDigests(
    thread.items,
    thread.fixedEnd,
    usable.map((e) => e.spanLength),
  );
  return usable.find((e, i) => digests[i] === e.spanDigest) ?? null;
}

/** One key per tenant, upstream and model, of fixed length: a model name is the client's string. */
function limitKey(tenant: string, upstream: string, model: string): string {
  return createHash('sha256').update(`${tenant}\0${upstream}\0${model.length}:${model}`).digest('hex').slice(0, 40);
}
