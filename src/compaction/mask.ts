import type { Dialect, Entry } from '../dialects/types.js';
import { unitsOf } from './conversation.js';
import { formatSize } from './shrink.js';
import { itemBytes, itemsBytes } from './size.js';
import { resultLine } from './trail.js';
import { timeSlice } from '../lib/time-slice.js';

/*
 * Observation masking, the rung before summarising: old tool outputs, oldest first, become one line
 * each until the conversation is under the aim. No model is asked anything.
 */

export interface MaskInput {
  items: readonly unknown[];
  entries: readonly Entry[];
  dialect: Pick<Dialect, 'mask' | 'render'>;
  keepFirst: number;
  aimBytes: number;
  /** Where the limit is a guess (a 413 that states none), so is the aim: go as far under it as masking goes. */
  all?: boolean;
}

export interface Masked {
  items: unknown[];
  end: number;
  masked: number;
}

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
