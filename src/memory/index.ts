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

/** Worked out once a request (rescue/identity.ts). */
export interface Who {
  tenant: string;
  /** Name and URL (upstreams.ts), so no two upstreams share what is remembered. */
  upstream: string;
  api: string;
  /** Undefined when the request names none: then nothing is learned or believed for it. */
  model?: string;
  agentSession?: string;
}

export interface Thread {
  readonly who: Who;
  readonly session: string;
  readonly items: readonly unknown[];
  /** Where the kept prefix ends: a remembered span starts there. */
  readonly fixedEnd: number;
}

export interface Remembered {
  entry: MemoryEntry | null;
  bounds: Bounds | undefined;
}
/** The right to compact a conversation and remember the result: one request at a time across every replica. */
export interface Lease {
  readonly session: string;
  readonly token: string;
  release(): Promise<void>;
}

/**
 * Leaves room for a number written shorter than JavaScript writes it (`1e5`); one still taken for
 * smaller is only not compacted ahead: its refusal is rescued, and the rescue recalls the summary.
 */
const EXTENDING_SHARE = 0.9;
/** A holder that crashed frees its lease within this. */
const LEASE_TTL_MS = 10_000;
const STORE_PAUSE_MS = 1_000;
const SLOW_FAILURE_MS = 100;
/** Summaries may take a minute. */
const LEASE_RENEW_MS = 3_000;

/**
 * Per tenant: compactions per conversation (so a session that overflowed once is not summarised from
 * scratch every turn) and the limits rejections stated. Every store failure is a miss, logged once.
 */
export class CompactionMemory {
  private storeDown = false;
  private pausedUntil = 0;
  /**
   * For a store of this process alone: the smallest request that could extend a compaction, or disprove a
   * limit, remembered here. Each only falls: an expired entry leaves it (a lookup too many, never one too few).
   */
  private smallestExtending = Infinity;
  private smallestDisproving = Infinity;

  constructor(
    private readonly store: MemoryStore,
    private readonly metrics: MemoryMetrics,
    private readonly log: FastifyBaseLogger,
  ) {}

  /** In one read: the newest compaction whose span the thread repeats exactly, and the limits believed. */
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

  /** A lease lost meanwhile (expired, or taken by another replica after a failover) writes nothing. */
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
   * Waits up to `waitMs` for another holder, whose summary the caller then recalls. Null when the wait ran
   * out, the client left, or the store failed: the caller compacts alone and remembers nothing.
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

  async reachOf(tenant: string): Promise<Reach> {
    return (await this.guard('read', () => this.store.reachOf(tenant), undefined)) ?? NO_REACH;
  }

  /** A learned limit alone never reads a request before its first attempt (rescue/proactive.ts). */
  mayRecall(bytes: number): boolean {
    return this.store.mayHaveTenants() && (this.store.shared || bytes >= this.smallestExtending);
  }

  mayLoosen(bytes: number): boolean {
    return this.store.mayHaveTenants() && (this.store.shared || bytes >= this.smallestDisproving);
  }

  thread(who: Who, items: readonly unknown[], fixedEnd: number): Thread {
    const session = sessionKey(who.tenant, who.upstream, who.api, who.model ?? '', items, fixedEnd, who.agentSession);
    return { who, session, items, fixedEnd };
  }

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
   * After a slow failure (timeout, cluster retrying dead nodes) every operation misses at once for
   * STORE_PAUSE_MS, so a request does not pay each operation's bound in turn. A quick failure pauses nothing.
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
