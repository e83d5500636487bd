import { getHeapStatistics } from 'node:v8';
import type { Gauge } from 'prom-client';

/*
 * How much memory rescues may hold at once, gateway-wide. A rescue parses its body and builds the
 * compaction's views of it; its cost is estimated before the parse (rescueCost). Past the budget a
 * rescue waits its turn briefly, and is then shed: the client gets the upstream's own error, as
 * when compaction is off, and the process stays up for everyone else.
 */

/** A held share of the budget, given back once. */
export type Release = () => void;

export class RescueBudget {
  private used = 0;
  private readonly queue: Array<{ bytes: number; grant: (release: Release | null) => void }> = [];

  constructor(
    readonly limitBytes: number,
    private readonly gauge?: Gauge<'state'>,
  ) {
    gauge?.set({ state: 'limit' }, limitBytes);
    gauge?.set({ state: 'in_use' }, 0);
  }

  /** Bytes of bodies under rescue now. */
  get inUse(): number {
    return this.used;
  }

  /**
   * A share of `bytes`, at once when it fits, else as soon as it does within `waitMs`, in the
   * order asked; null when it does not (or `signal` aborts first): the rescue is shed. A body
   * larger than the whole budget is shed at once.
   */
  hold(bytes: number, waitMs: number, signal?: AbortSignal): Promise<Release | null> {
    if (bytes > this.limitBytes || signal?.aborted) return Promise.resolve(null);
    if (this.queue.length === 0 && this.used + bytes <= this.limitBytes) return Promise.resolve(this.take(bytes));
    if (waitMs <= 0) return Promise.resolve(null);
    return new Promise((resolve) => {
      const waiter = {
        bytes,
        grant: (release: Release | null) => {
          clearTimeout(timer);
          signal?.removeEventListener('abort', giveUp);
          resolve(release);
        },
      };
      const giveUp = () => {
        const at = this.queue.indexOf(waiter);
        if (at >= 0) this.queue.splice(at, 1);
        waiter.grant(null);
        // The one ahead leaving may let the next ones in.
        this.grantWaiting();
      };
      const timer = setTimeout(giveUp, waitMs);
      signal?.addEventListener('abort', giveUp, { once: true });
      this.queue.push(waiter);
    });
  }

  private take(bytes: number): Release {
    this.used += bytes;
    this.gauge?.set({ state: 'in_use' }, this.used);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.used -= bytes;
      this.gauge?.set({ state: 'in_use' }, this.used);
      this.grantWaiting();
    };
  }

  private grantWaiting(): void {
    while (this.queue.length > 0 && this.used + this.queue[0].bytes <= this.limitBytes) {
      const next = this.queue.shift()!;
      next.grant(this.take(next.bytes));
    }
  }
}

/**
 * What a rescue holds at its peak, estimated before its body is parsed: the body's text and the
 * strings parsed out of it (two bytes a byte), and for each JSON object its parsed form, its
 * entry, size and digest (measured: a million one-line messages, 44 bytes each, take 150 + 130 +
 * 35 + 80 bytes of heap each; see bench/hostile-load.ts).
 */
export function rescueCost(bodyBytes: number, objects: number): number {
  return 2 * bodyBytes + 400 * objects;
}

/**
 * The default budget: 45% of the heap for what rescues hold at once, the rest for everything else.
 * 384 MB of heap takes four 20 MB agent conversations at once (44 MB each), and sheds a body of
 * a million tiny messages (488 MB) before it is parsed.
 */
export function defaultRescueBudget(heapLimitBytes = getHeapStatistics().heap_size_limit): number {
  return Math.floor(heapLimitBytes * 0.45);
}
