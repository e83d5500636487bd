import type { Api } from '../dialects/types.js';
import type { Decided, Decisions, StreamedCut } from '../rescue/context.js';
import type { Outcome, RescueRecord } from '../rescue/report.js';
import { cutEntry, entryOf, type StatusEntry } from './entry.js';

/** What the gateway did for one upstream and API since it started. */
export interface Tally {
  upstream: string;
  api: Api;
  /** Refused by the upstream as overlong. */
  refused: number;
  /** Answers the upstream silently cut: rescued while held, or relayed as they were (a stream under way). */
  truncated: number;
  /** Replayed smaller, and the upstream accepted the replay. */
  rescued: number;
  /** Sent compacted before a first attempt (from memory, or to fit a known window). */
  ahead: number;
  /** Decisions that did not end with a smaller request accepted, by outcome. */
  failed: Partial<Record<Exclude<Outcome, 'replayed' | 'compacted'>, number>>;
  summarizerCalls: number;
  summarizerTokens: { input: number; output: number };
  /** Prompt tokens the compactions took out, as estimated. */
  tokensRemoved: number;
}

/** Decisions the page lists, newest first. */
export const RECENT_CAPACITY = 50;

/**
 * The status page's feed: the last RECENT_CAPACITY decisions in a ring, and a tally per upstream
 * and API. Each decision costs one copy of its figures (entry.ts), so memory is bounded by the
 * capacity times an entry's bound, whatever the traffic.
 */
export class RecentDecisions implements Decisions {
  private readonly ring: StatusEntry[] = [];
  private next = 0;
  private count = 0;
  private readonly tallies = new Map<string, Tally>();

  /** `keepContent`: whether summaries and trails are kept at all (only where they may be shown). */
  constructor(
    private readonly keepContent: boolean,
    readonly capacity = RECENT_CAPACITY,
    private readonly now: () => Date = () => new Date(),
  ) {}

  decided(record: RescueRecord, request: Decided): void {
    this.append(entryOf(record, request, ++this.count, this.now(), this.keepContent));
    add(this.tallyOf(record.upstream ?? 'default', record.api), record);
  }

  cutStreamed(cut: StreamedCut, request: Decided): void {
    this.append(cutEntry(cut, request, ++this.count, this.now()));
    this.tallyOf(cut.upstream, cut.api).truncated++;
  }

  /** The entries, newest first. */
  entries(): StatusEntry[] {
    const oldestFirst = this.ring.length < this.capacity ? this.ring : [...this.ring.slice(this.next), ...this.ring.slice(0, this.next)];
    return [...oldestFirst].reverse();
  }

  /** Decisions made since start, listed or not. */
  get decisions(): number {
    return this.count;
  }

  /** A copy of each tally, in the order they began. */
  totals(): Tally[] {
    return [...this.tallies.values()].map((t) => structuredClone(t));
  }

  private append(entry: StatusEntry): void {
    if (this.ring.length < this.capacity) this.ring.push(entry);
    else this.ring[this.next] = entry;
    this.next = (this.next + 1) % this.capacity;
  }

  private tallyOf(upstream: string, api: Api): Tally {
    const key = `${upstream}\0${api}`;
    let tally = this.tallies.get(key);
    if (!tally) this.tallies.set(key, (tally = emptyTally(upstream, api)));
    return tally;
  }
}

function emptyTally(upstream: string, api: Api): Tally {
  return {
    upstream,
    api,
    refused: 0,
    truncated: 0,
    rescued: 0,
    ahead: 0,
    failed: {},
    summarizerCalls: 0,
    summarizerTokens: { input: 0, output: 0 },
    tokensRemoved: 0,
  };
}

function add(t: Tally, r: RescueRecord): void {
  if (r.trigger === 'rejected') t.refused++;
  if (r.trigger === 'truncated') t.truncated++;
  if (r.outcome === 'replayed') t.rescued++;
  else if (r.outcome === 'compacted') t.ahead++;
  else t.failed[r.outcome] = (t.failed[r.outcome] ?? 0) + 1;
  const c = r.compaction;
  if (c?.outcome !== 'compacted') return;
  t.summarizerCalls += c.summarizerCalls;
  t.summarizerTokens.input += c.summarizerTokens?.input ?? 0;
  t.summarizerTokens.output += c.summarizerTokens?.output ?? 0;
  t.tokensRemoved += Math.max(0, c.tokensBefore - c.tokensAfter);
}
