/*
 * Long loops over a conversation (a million messages fit in the body limit) give the event loop
 * back between slices of work, so that one huge rescue never stalls every other client's request.
 */

/** How long a loop may hold the event loop before it yields. */
const SLICE_MS = 4;

export interface TimeSlice {
  /** Whether the slice is spent: cheap enough to ask on every iteration. */
  due(): boolean;
  /** Lets other work run, then starts a new slice. */
  pause(): Promise<void>;
}

export function timeSlice(ms = SLICE_MS): TimeSlice {
  let since = performance.now();
  return {
    due: () => performance.now() - since >= ms,
    pause: async () => {
      await letOthersRun();
      since = performance.now();
    },
  };
}

/** Lets other work run before what follows: a boundary between two long phases. */
export function letOthersRun(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

export async function mapInSlices<T, U>(list: readonly T[], each: (value: T, index: number) => U): Promise<U[]> {
  const out: U[] = [];
  await forEachInSlices(list, (value, i) => out.push(each(value, i)));
  return out;
}

export async function forEachInSlices<T>(list: readonly T[], each: (value: T, index: number) => void): Promise<void> {
  const slice = timeSlice();
  for (let i = 0; i < list.length; i++) {
    each(list[i], i);
    if (slice.due()) await slice.pause();
  }
}
