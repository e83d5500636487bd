import type { Dialect, Entry } from '../dialects/types.js';
import { unitsOf } from './conversation.js';
import { formatSize } from './shrink.js';
import { itemBytes, itemsBytes } from './size.js';
import { resultLine } from './trail.js';
import { timeSlice } from '../lib/time-slice.js';

/*
 * The rung between lowering the completion limit and summarising: observation masking. Old tool
 * outputs, oldest first, become one line each (the tool, the output's size, what the call was and
 * what it showed), until the conversation is under the aim; the calls, the assistant's text and
 * the person's turns stay where they are. No model is asked anything. Measured on agent sessions,
 * it keeps what matters to the next step about as well as a summary, at no cost (see
 * BENCHMARKS.md); when masking every older output is not enough, the conversation is summarised.
 */

export interface MaskInput {
  items: readonly unknown[];
  entries: readonly Entry[];
  dialect: Pick<Dialect, 'mask' | 'render'>;
  /** Items before this stay as they are (the head, the opening, a remembered span). */
  keepFirst: number;
  aimBytes: number;
  /**
   * Mask every older output, not only down to the aim: where the limit is a guess (a 413 that
   * states none), the aim is too, and the request should come as far under it as masking goes.
   */
  all?: boolean;
}

export interface Masked {
  items: unknown[];
  /** The index just after the last masked item: the span that changed. */
  end: number;
  masked: number;
}

/** The conversation with its oldest outputs masked down to the aim; null when masking all of them does not get there. */
export async function maskOutputs(input: MaskInput): Promise<Masked | null> {
  const { items, entries, dialect } = input;
  const units = unitsOf(entries, input.keepFirst);
  if (units.length < 2) return null;
  // Oldest first, so the newest outputs (the agent's working set) go last; the last unit never.
  const protectFrom = units[units.length - 1][0];
  let total = itemsBytes(items);
  // Even an item that lost all of its bytes would leave the rest over the aim: masking cannot get
  // there, and the placeholders (a scan of every output) need not be made to find that out.
  let maskable = 0;
  for (let i = input.keepFirst; i < protectFrom; i++) if (entries[i].answers.length > 0) maskable += itemBytes(items[i]);
  if (total - maskable > input.aimBytes) return null;
  const calls = new Map<string, { name: string; args: string }>();
  const out = items.slice();
  let end = -1;
  let masked = 0;
  const slice = timeSlice();
  for (let i = 0; i < protectFrom && (input.all || total > input.aimBytes); i++) {
    if (slice.due()) await slice.pause();
    if (entries[i].calls.length > 0) for (const call of dialect.render(items[i]).calls) calls.set(call.id, call);
    if (i < input.keepFirst || entries[i].answers.length === 0) continue;
    let replaced = 0;
    const item = dialect.mask(items[i], (output) => {
      replaced++;
      return placeholder(calls.get(output.id), output.text, output.bytes);
    });
    if (item === null) continue;
    const saved = itemBytes(items[i]) - itemBytes(item);
    // A short output is its own best line.
    if (saved <= 0) continue;
    out[i] = item;
    total -= saved;
    end = i + 1;
    masked += replaced;
  }
  return total <= input.aimBytes && end > 0 ? { items: out, end, masked } : null;
}

function placeholder(call: { name: string; args: string } | undefined, text: string, bytes: number): string {
  const line = resultLine(call, text);
  return `[tool output omitted by compaction-gateway: ${call?.name ?? 'tool'}, ${formatSize(bytes)}${line ? `; ${line}` : ''}]`;
}
