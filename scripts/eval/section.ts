/*
 * The section of BENCHMARKS.md that `npm run eval:summary -- --write` owns, between two markers.
 * `npm run bench` rewrites the rest of the file and keeps this section (bench/run.ts); this
 * writer touches nothing outside its markers.
 */

export const EVAL_START = '<!-- eval:summary start -->';
export const EVAL_END = '<!-- eval:summary end -->';
const EVAL_HEADING = '## What a compaction keeps (npm run eval:summary)';

/** The marked section of `text`, markers included, or undefined. */
export function sectionOf(text: string, start: string, end: string): string | undefined {
  const at = text.indexOf(start);
  const stop = text.indexOf(end, at);
  return at >= 0 && stop > at ? text.slice(at, stop + end.length) : undefined;
}

/** `text` with its eval section replaced by one made of `body`; appended at the end when it has none. */
export function withEvalSection(text: string, body: string): string {
  const section = `${EVAL_START}\n${EVAL_HEADING}\n\n${body.trim()}\n${EVAL_END}`;
  const old = sectionOf(text, EVAL_START, EVAL_END);
  if (old === undefined) return `${text.trimEnd()}${text.trim() ? '\n\n' : ''}${section}\n`;
  const at = text.indexOf(old);
  return text.slice(0, at) + section + text.slice(at + old.length);
}
