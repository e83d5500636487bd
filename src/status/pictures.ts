import type { ItemRun, StatusEntry } from './entry.js';

/*
 * The page's two pictures, as inline SVG: a decision's size before and after against its window,
 * and the conversation's items by what became of them. Colours come from the stylesheet (classes),
 * the numbers from the entry; each picture says them in its <title> too.
 */

const WIDTH = 300;

/** Text safe inside an element or a quoted attribute. */
export function esc(text: string | number): string {
  return String(text).replace(/[&<>"']/g, (ch) => `&#${ch.charCodeAt(0)};`);
}

export function n(value: number): string {
  return Math.round(value).toLocaleString('en-US');
}

/** The sizes a bar compares, in tokens where the decision knew them, else bytes. */
function barSizes(e: StatusEntry): { unit: 'tokens' | 'bytes'; before: number; after?: number; window?: number } | undefined {
  if (e.before?.tokens) return { unit: 'tokens', before: e.before.tokens, after: e.after?.tokens, window: e.windowTokens };
  if (e.before?.bytes) return { unit: 'bytes', before: e.before.bytes, after: e.after?.bytes };
  return undefined;
}

/** Before (pale), after (solid) and the window (a mark), on one scale: the largest of the three. */
export function sizeBar(e: StatusEntry): string {
  const sizes = barSizes(e);
  if (!sizes) return '';
  const { unit, before, after, window } = sizes;
  const scale = Math.max(before, after ?? 0, window ?? 0);
  const x = (v: number) => ((WIDTH * v) / scale).toFixed(1);
  const said = [
    `before ${n(before)} ${unit}`,
    after !== undefined ? `after ${n(after)}` : '',
    window !== undefined ? `window ${n(window)}` : '',
  ]
    .filter(Boolean)
    .join(', ');
  const data = [
    `data-unit="${unit}"`,
    `data-before="${before}"`,
    after !== undefined ? `data-after="${after}"` : '',
    window !== undefined ? `data-window="${window}"` : '',
  ]
    .filter(Boolean)
    .join(' ');
  return [
    `<svg class="bar" viewBox="0 0 ${WIDTH} 14" preserveAspectRatio="none" role="img" ${data}>`,
    `<title>${esc(said)}</title>`,
    `<rect class="track" x="0" y="0" width="${WIDTH}" height="14"/>`,
    `<rect class="before" x="0" y="0" width="${x(before)}" height="14"/>`,
    after !== undefined ? `<rect class="after" x="0" y="3" width="${x(after)}" height="8"/>` : '',
    window !== undefined ? `<rect class="window" x="${Math.max(0, Number(x(window)) - 1).toFixed(1)}" y="0" width="2" height="14"/>` : '',
    '</svg>',
  ].join('');
}

const FATE_SAID: Record<ItemRun['fate'], string> = {
  kept: 'kept as sent',
  condensed: 'condensed into the summary',
  masked: 'tool outputs masked',
  pinned: 'kept after the summary (the latest input)',
};

/** One cell per run of items, as wide as the run, coloured by its fate. */
export function itemStrip(runs: readonly ItemRun[]): string {
  const total = runs.at(-1)?.to ?? 0;
  if (total === 0) return '';
  const cells = runs.map((r) => {
    const which = r.to - r.from === 1 ? `item ${r.from + 1}` : `items ${r.from + 1}-${r.to}`;
    return `<rect class="${r.fate}" x="${r.from}" y="0" width="${r.to - r.from}" height="1"><title>${esc(`${which}: ${FATE_SAID[r.fate]}`)}</title></rect>`;
  });
  return `<svg class="items" viewBox="0 0 ${total} 1" preserveAspectRatio="none" role="img" aria-label="${esc(stripSaid(runs))}">${cells.join('')}</svg>`;
}

/** `items 1-2 kept as sent; items 3-17 condensed into the summary; ...` */
export function stripSaid(runs: readonly ItemRun[]): string {
  return runs.map((r) => `${r.to - r.from === 1 ? `item ${r.from + 1}` : `items ${r.from + 1}-${r.to}`} ${FATE_SAID[r.fate]}`).join('; ');
}

export const FATES = FATE_SAID;
