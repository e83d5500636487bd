import type { Dialect, Slot } from '../dialects/types.js';
import { jsonBytes, jsonTextBytes, prefixWithinBytes, suffixWithinBytes } from './size.js';

/*
 * The last resort: images become a short text, then long texts lose their middle, oldest first. Every
 * step saves an exact number of bytes, so the planner keeps its arithmetic. Changed items are copies.
 */

export interface ShrinkResult {
  items: unknown[];
  savedBytes: number;
  cut: number;
}

export const MIN_KEEP_CHARS = 300;

/** With `lastWhole`, the last item's last text stays: an agent's instruction, after the tool results it rides with. */
export function shrinkKept(
  items: readonly unknown[],
  dialect: Pick<Dialect, 'slots'>,
  excessBytes: number,
  protectedIndex = -1,
  lastWhole = false,
): ShrinkResult {
  const result: ShrinkResult = { items: items.slice(), savedBytes: 0, cut: 0 };
  if (excessBytes <= 0 || items.length === 0) return result;
  const last = items.length - 1;
  const order = [...Array(last).keys()].filter((i) => i !== protectedIndex);
  for (const pass of [order, last === protectedIndex ? [] : [last]]) {
    for (const kind of ['image', 'text'] as const) {
      for (const i of pass) {
        if (result.savedBytes >= excessBytes) return result;
        const slots = dialect.slots(result.items[i]).filter((s) => s.kind === kind);
        shrinkItem(result, i, lastWhole && i === last && kind === 'text' ? slots.slice(0, -1) : slots, excessBytes);
      }
    }
  }
  return result;
}

function shrinkItem(result: ShrinkResult, index: number, slots: Slot[], excessBytes: number): void {
  for (const slot of slots) {
    const need = excessBytes - result.savedBytes;
    if (need <= 0) return;
    const edit = slot.kind === 'image' ? imageEdit(slot) : textEdit(slot.text, need);
    if (!edit) continue;
    result.items[index] = setAt(result.items[index], slot.path, edit.value);
    result.savedBytes += edit.saved;
    result.cut++;
  }
}

function imageEdit(slot: Extract<Slot, { kind: 'image' }>): { value: unknown; saved: number } | null {
  const bytes = jsonBytes(slot.value);
  const value = slot.placeholder(`[image omitted by compaction-gateway: ${formatSize(bytes)}]`);
  const saved = bytes - jsonBytes(value);
  return saved > 0 ? { value, saved } : null;
}

function textEdit(text: string, need: number): { value: string; saved: number } | null {
  if (text.length <= 2 * MIN_KEEP_CHARS) return null;
  const bytes = jsonTextBytes(text);
  const floor = textFloor(text);
  if (bytes <= floor) return null;
  const value = cutText(text, Math.max(floor, bytes - need));
  const saved = bytes - jsonTextBytes(value);
  return saved > 0 ? { value, saved } : null;
}

export function textFloor(text: string): number {
  return jsonTextBytes(text, 0, MIN_KEEP_CHARS) + jsonTextBytes(text, text.length - MIN_KEEP_CHARS) + markerBytesAtMost(text.length);
}

export function setAt(value: unknown, path: readonly (string | number)[], replacement: unknown): unknown {
  if (path.length === 0) return replacement;
  const [key, ...rest] = path;
  if (Array.isArray(value)) {
    const copy = value.slice();
    copy[key as number] = setAt(value[key as number], rest, replacement);
    return copy;
  }
  const record = value as Record<string, unknown>;
  return { ...record, [key]: setAt(record[key as string], rest, replacement) };
}

/** "1.2 MB", "34.5 KB", "812 bytes": decimal units, one decimal, no locale. */
export function formatSize(bytes: number): string {
  if (bytes >= 1e6) return `${(bytes / 1e6).toFixed(1)} MB`;
  if (bytes >= 1e3) return `${(bytes / 1e3).toFixed(1)} KB`;
  return `${bytes} bytes`;
}

export function cutMarker(cutChars: number): string {
  return `\n[... ${formatCount(cutChars)} characters cut by compaction-gateway ...]\n`;
}

function markerBytesAtMost(textLength: number): number {
  return jsonBytes(cutMarker(textLength)) - 2;
}

export function cutText(text: string, targetBytes: number): string {
  const budget = Math.max(0, targetBytes - markerBytesAtMost(text.length));
  const minHead = jsonTextBytes(text, 0, Math.min(MIN_KEEP_CHARS, text.length));
  const minTail = jsonTextBytes(text, Math.max(0, text.length - MIN_KEEP_CHARS));
  const headBudget = Math.max(Math.min(Math.floor(budget / 2), budget - minTail), Math.min(minHead, budget));
  const head = prefixWithinBytes(text, headBudget);
  const rest = budget - jsonTextBytes(text, 0, head);
  const tail = Math.min(suffixWithinBytes(text, rest), text.length - head);
  return text.slice(0, head) + cutMarker(text.length - head - tail) + text.slice(text.length - tail);
}

/** 4812330 -> "4,812,330", independent of the process locale. */
export function formatCount(n: number): string {
  return String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ',');
}
