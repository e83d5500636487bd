import { getHeapStatistics } from 'node:v8';
import type { Gauge } from 'prom-client';
import type { JsonShape } from '../lib/json-shape.js';

/*
 * Past the budget a rescue waits briefly, its body counting, and is then shed: the client gets the
 * upstream's own error, and the process stays up for everyone else.
 */

export type Release = () => void;

interface Waiter {
  bytes: number;
  waiting: number;
  grant: (release: Release | null) => void;
}

export class RescueBudget {
  private used = 0;
  private readonly queue: Waiter[] = [];

  constructor(
    readonly limitBytes: number,
    private readonly gauge?: Gauge<'state'>,
  ) {
    gauge?.set({ state: 'limit' }, limitBytes);
    gauge?.set({ state: 'in_use' }, 0);
  }

  get inUse(): number {
    return this.used;
  }

  /** In the order asked; null: the rescue is shed (at once when its body does not even fit beside what is held). */
  hold(bytes: number, waitMs: number, signal?: AbortSignal, waiting = 0): Promise<Release | null> {
    if (bytes > this.limitBytes || signal?.aborted) return Promise.resolve(null);
    if (this.queue.length === 0 && this.used + bytes <= this.limitBytes) return Promise.resolve(this.take(bytes));
    if (waitMs <= 0 || this.used + waiting > this.limitBytes) return Promise.resolve(null);
    this.add(waiting);
    return new Promise((resolve) => {
      const waiter: Waiter = {
        bytes,
        waiting,
        grant: (release: Release | null) => {
          clearTimeout(timer);
          signal?.removeEventListener('abort', giveUp);
          resolve(release);
        },
      };
      const giveUp = () => {
        const at = this.queue.indexOf(waiter);
        if (at >= 0) this.queue.splice(at, 1);
        this.add(-waiting);
        waiter.grant(null);
        // The one ahead leaving may let the next ones in.
        this.grantWaiting();
      };
      const timer = setTimeout(giveUp, waitMs);
      signal?.addEventListener('abort', giveUp, { once: true });
      this.queue.push(waiter);
    });
  }

  private add(bytes: number): void {
    this.used += bytes;
    this.gauge?.set({ state: 'in_use' }, this.used);
  }

  private take(bytes: number): Release {
    this.add(bytes);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.add(-bytes);
      this.grantWaiting();
    };
  }

  private grantWaiting(): void {
    // What the first in line holds already, its body, is part of its share.
    while (this.queue.length > 0 && this.used - this.queue[0].waiting + this.queue[0].bytes <= this.limitBytes) {
      const next = this.queue.shift()!;
      this.add(-next.waiting);
      next.grant(this.take(next.bytes));
    }
  }
}

/* Heap per piece of a body once read, and per conversation item compacted (bench/parse-heap.ts; bench/findings.md). */
const PER_BYTE = 2.75;
const PER_BYTE_NOT_ASCII = 1;
const PER_STRING = 32;
const PER_KEY = 80;
const PER_COMMA = 24;
const PER_OBJECT = 64;
const PER_ARRAY = 40;
const PER_ITEM = 1024;

export function rescueHeapCost(s: JsonShape): number {
  const perByte = PER_BYTE + (s.ascii ? 0 : PER_BYTE_NOT_ASCII);
  return Math.ceil(
    perByte * s.bytes +
      PER_STRING * s.strings +
      PER_KEY * s.keys +
      PER_COMMA * s.commas +
      PER_OBJECT * s.objects +
      PER_ARRAY * s.arrays +
      PER_ITEM * s.items,
  );
}

/** Its body as received is outside the heap. */
export function rescueCost(s: JsonShape): number {
  return s.bytes + rescueHeapCost(s);
}

/** The default budget: half the heap limit for what rescues hold at once, bodies included, the rest for everything else. */
export function defaultRescueBudget(heapLimitBytes = getHeapStatistics().heap_size_limit): number {
  return Math.floor(heapLimitBytes * 0.5);
}
