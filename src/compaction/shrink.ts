import type { ChatMessage } from './types.js';
import { jsonBytes, jsonTextBytes, prefixWithinBytes, suffixWithinBytes } from './size.js';

/*
 * Shrinking the kept tail when it alone is too big: first inline images are replaced by a short
 * text part, then long texts lose their middle. Every step saves an exact number of bytes (a part
 * or string value is swapped for a smaller one, nothing else in the message moves), so the planner
 * can keep its arithmetic without stringifying messages again. Messages and parts that change are
 * copies; the input is never touched.
 */

export interface ShrinkResult {
  tail: ChatMessage[];
  savedBytes: number;
  shrunkContents: number;
  replacedImages: number;
}

/** Characters always kept at each end of a cut text, so the reader still sees how it starts and ends. */
export const MIN_KEEP_CHARS = 300;

const IMAGE_PART_TYPES = new Set(['image_url', 'image', 'input_image']);

/**
 * Saves at least `excessBytes` from `tail` if it can, never touching the message at
 * `protectedIndex` (the last user message, or -1). Saves less when there is not enough to cut.
 */
export function shrinkTail(tail: ChatMessage[], protectedIndex: number, excessBytes: number): ShrinkResult {
  if (excessBytes <= 0) return { tail, savedBytes: 0, shrunkContents: 0, replacedImages: 0 };
  const images = replaceImages(tail, protectedIndex, excessBytes);
  if (images.savedBytes >= excessBytes) return images;
  const texts = cutTexts(images.tail, protectedIndex, excessBytes - images.savedBytes);
  return { ...texts, savedBytes: images.savedBytes + texts.savedBytes, replacedImages: images.replacedImages };
}

// ---------------------------------------------------------------------------------------------
// Images

interface ImageSlot {
  message: number;
  part: number;
  placeholder: { type: 'text'; text: string };
  saving: number;
}

/** Replaces the largest inline images first, only as many as needed. */
export function replaceImages(tail: ChatMessage[], protectedIndex: number, excessBytes: number): ShrinkResult {
  const slots = imageSlots(tail, protectedIndex).sort((a, b) => b.saving - a.saving);
  const chosen: ImageSlot[] = [];
  let saved = 0;
  for (const slot of slots) {
    if (saved >= excessBytes) break;
    chosen.push(slot);
    saved += slot.saving;
  }
  const replaced = replaceParts(tail, chosen.map((s) => ({ ...s, value: s.placeholder })));
  return { tail: replaced, savedBytes: saved, shrunkContents: 0, replacedImages: chosen.length };
}

function imageSlots(tail: ChatMessage[], protectedIndex: number): ImageSlot[] {
  const slots: ImageSlot[] = [];
  tail.forEach((message, m) => {
    if (m === protectedIndex || !Array.isArray(message.content)) return;
    message.content.forEach((part: unknown, p) => {
      if (!isInlineImage(part)) return;
      const bytes = jsonBytes(part);
      const placeholder = { type: 'text' as const, text: `[image omitted by compaction-gateway: ${formatSize(bytes)}]` };
      const saving = bytes - jsonBytes(placeholder);
      if (saving > 0) slots.push({ message: m, part: p, placeholder, saving });
    });
  });
  return slots;
}

/** An image part carrying its data inline (a data: URL or base64), not a short link. */
export function isInlineImage(part: unknown): boolean {
  if (!isRecord(part) || typeof part.type !== 'string' || !IMAGE_PART_TYPES.has(part.type)) return false;
  return hasInlineData(part, 0);
}

function hasInlineData(value: unknown, depth: number): boolean {
  if (typeof value === 'string') return value.startsWith('data:') || value.length > 1024;
  if (!isRecord(value) || depth > 3) return false;
  return Object.values(value).some((v) => hasInlineData(v, depth + 1));
}

/** "1.2 MB", "34.5 KB", "812 bytes": decimal units, one decimal, no locale. */
export function formatSize(bytes: number): string {
  if (bytes >= 1e6) return `${(bytes / 1e6).toFixed(1)} MB`;
  if (bytes >= 1e3) return `${(bytes / 1e3).toFixed(1)} KB`;
  return `${bytes} bytes`;
}

// ---------------------------------------------------------------------------------------------
// Texts

interface TextSlot {
  message: number;
  /** Index in the content array, or -1 for a string `content`. */
  part: number;
  text: string;
  /** Escaped size of the text now, and the smallest it may be cut to. */
  bytes: number;
  floor: number;
  /** 0 for tool outputs, which are cut first; 1 for everything else. */
  tier: number;
}

/**
 * Cuts the middle out of long texts. Within a tier the cut is levelled: every text above some
 * size L is brought down to L (but not below its floor), with L as high as the needed saving
 * allows, so one huge tool output is cut before two medium ones lose anything.
 */
export function cutTexts(tail: ChatMessage[], protectedIndex: number, excessBytes: number): ShrinkResult {
  const slots = textSlots(tail, protectedIndex);
  const targets = new Map<TextSlot, number>();
  let need = excessBytes;
  for (const tier of [0, 1]) {
    if (need <= 0) break;
    const inTier = slots.filter((s) => s.tier === tier);
    const level = levelFor(inTier, need);
    for (const slot of inTier) {
      const target = Math.max(level, slot.floor);
      if (slot.bytes > target) targets.set(slot, target);
    }
    need -= reduction(inTier, level);
  }
  return applyCuts(tail, targets);
}

function textSlots(tail: ChatMessage[], protectedIndex: number): TextSlot[] {
  const slots: TextSlot[] = [];
  tail.forEach((message, m) => {
    if (m === protectedIndex) return;
    const tier = message.role === 'tool' || message.role === 'function' ? 0 : 1;
    if (typeof message.content === 'string') pushSlot(slots, message.content, m, -1, tier);
    if (!Array.isArray(message.content)) return;
    message.content.forEach((part: unknown, p) => {
      if (isRecord(part) && typeof part.text === 'string') pushSlot(slots, part.text, m, p, tier);
    });
  });
  return slots;
}

function pushSlot(slots: TextSlot[], text: string, message: number, part: number, tier: number): void {
  if (text.length <= 2 * MIN_KEEP_CHARS) return;
  const bytes = jsonBytes(text) - 2;
  const floor =
    jsonTextBytes(text, 0, MIN_KEEP_CHARS) +
    jsonTextBytes(text, text.length - MIN_KEEP_CHARS) +
    markerBytesAtMost(text.length);
  if (bytes > floor) slots.push({ message, part, text, bytes, floor, tier });
}

/** Bytes saved if every text above `level` is cut down to it (never below its floor). */
function reduction(slots: TextSlot[], level: number): number {
  let saved = 0;
  for (const slot of slots) saved += Math.max(0, slot.bytes - Math.max(level, slot.floor));
  return saved;
}

/** The highest level that still saves `need` bytes; 0 (cut all to their floors) when none does. */
function levelFor(slots: TextSlot[], need: number): number {
  let low = 0;
  let high = slots.reduce((max, s) => Math.max(max, s.bytes), 0);
  if (reduction(slots, low) < need) return 0;
  while (low < high) {
    const mid = Math.ceil((low + high) / 2);
    if (reduction(slots, mid) >= need) low = mid;
    else high = mid - 1;
  }
  return low;
}

function applyCuts(tail: ChatMessage[], targets: Map<TextSlot, number>): ShrinkResult {
  let saved = 0;
  const edits: PartEdit[] = [];
  for (const [slot, target] of targets) {
    const text = cutText(slot.text, target);
    saved += slot.bytes - (jsonBytes(text) - 2);
    edits.push({ message: slot.message, part: slot.part, value: text });
  }
  return { tail: replaceParts(tail, edits), savedBytes: saved, shrunkContents: edits.length, replacedImages: 0 };
}

/** The line that stands where the middle of a text was cut out. */
export function cutMarker(cutChars: number): string {
  return `\n[... ${formatCount(cutChars)} characters cut by compaction-gateway ...]\n`;
}

function markerBytesAtMost(textLength: number): number {
  return jsonBytes(cutMarker(textLength)) - 2;
}

/**
 * Keeps the start and the end of `text` so that the result, marker included, escapes to at most
 * `targetBytes` (and at least MIN_KEEP_CHARS at each end when the target allows).
 */
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

// ---------------------------------------------------------------------------------------------
// Copy-on-write edits

interface PartEdit {
  message: number;
  /** Index in the content array, or -1 to replace a string `content`. */
  part: number;
  /** A whole new part (images) or the new text of a text part / string content. */
  value: unknown;
}

function replaceParts(tail: ChatMessage[], edits: PartEdit[]): ChatMessage[] {
  if (edits.length === 0) return tail;
  const result = tail.slice();
  for (const edit of edits) result[edit.message] = applyEdit(result[edit.message], edit);
  return result;
}

function applyEdit(message: ChatMessage, edit: PartEdit): ChatMessage {
  if (edit.part === -1) return { ...message, content: edit.value };
  const parts = (message.content as unknown[]).slice();
  const old = parts[edit.part];
  parts[edit.part] = typeof edit.value === 'string' && isRecord(old) ? { ...old, text: edit.value } : edit.value;
  return { ...message, content: parts };
}

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** 4812330 -> "4,812,330", independent of the process locale. */
export function formatCount(n: number): string {
  return String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ',');
}
