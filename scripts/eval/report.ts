import { CATEGORIES, type Category, type CategoryScore } from './probes.js';
import type { CaseResult, Evaluation, Mode } from './evaluate.js';

/*
 * The figures a reader sees: per mode over every case, then per session. Recall is micro-averaged
 * (kept probes over all probes), so a long session weighs what it holds.
 */

export interface Tally {
  cases: number;
  compacted: number;
  condensedItems: number;
  score: Record<Category, CategoryScore>;
  writtenBytes: number;
  summarizerCalls: number;
  tokensIn: number;
  tokensOut: number;
  /** Whether every token figure came from the answers' usage. */
  tokensReported: boolean;
  strategies: Record<string, number>;
}

export function tally(results: readonly CaseResult[]): Tally {
  const t: Tally = {
    cases: 0,
    compacted: 0,
    condensedItems: 0,
    score: Object.fromEntries(CATEGORIES.map((c) => [c, { total: 0, kept: 0, missed: [] }])) as unknown as Tally['score'],
    writtenBytes: 0,
    summarizerCalls: 0,
    tokensIn: 0,
    tokensOut: 0,
    tokensReported: true,
    strategies: {},
  };
  for (const r of results) {
    t.cases++;
    t.summarizerCalls += r.summarizerCalls;
    t.tokensIn += r.tokens.input;
    t.tokensOut += r.tokens.output;
    t.tokensReported &&= r.tokens.reported;
    if (r.outcome !== 'compacted') continue;
    t.compacted++;
    t.condensedItems += r.condensedItems;
    t.writtenBytes += r.writtenBytes;
    const strategy = r.strategy ?? 'unknown';
    t.strategies[strategy] = (t.strategies[strategy] ?? 0) + 1;
    for (const c of CATEGORIES) {
      t.score[c].total += r.score[c].total;
      t.score[c].kept += r.score[c].kept;
      t.score[c].missed.push(...r.score[c].missed);
    }
  }
  return t;
}

/** Kept over total; undefined when there was nothing to keep. */
export function recall(t: Tally, category: Category): number | undefined {
  const { total, kept } = t.score[category];
  return total === 0 ? undefined : kept / total;
}

function byMode(results: readonly CaseResult[], modes: readonly Mode[]): Map<Mode, Tally> {
  return new Map(modes.map((m) => [m, tally(results.filter((r) => r.mode === m))]));
}

export interface Gate {
  minRecall: number;
  categories: readonly Category[];
  modes: readonly Mode[];
}

/** Each (mode, category) the gate covers whose recall is under the threshold, as a sentence. */
export function gateFailures(results: readonly CaseResult[], gate: Gate): string[] {
  const failures: string[] = [];
  for (const [mode, t] of byMode(results, gate.modes)) {
    for (const c of gate.categories) {
      const r = recall(t, c);
      if (r !== undefined && r < gate.minRecall) {
        failures.push(`${mode}: ${c} recall ${percent(r)} (${t.score[c].kept}/${t.score[c].total}) is under ${percent(gate.minRecall)}`);
      }
    }
  }
  return failures;
}

// ---------------------------------------------------------------------------------------------
// Markdown

const COLUMNS = `${CATEGORIES.join(' | ')} | summary bytes per compaction | summarizer calls | summarizer tokens in / out |`;

/** "12/40 (30%)", or "-" when there was nothing to keep. */
function recallCell(s: CategoryScore): string {
  return s.total === 0 ? '-' : `${s.kept}/${s.total} (${percent(s.kept / s.total)})`;
}

function percent(x: number): string {
  return `${Math.floor(x * 1000) / 10}%`.replace('.0%', '%');
}

function cells(t: Tally): string {
  const bytes = t.compacted === 0 ? '-' : String(Math.round(t.writtenBytes / t.compacted));
  const estimated = t.tokensReported ? '' : ' (est.)';
  return `${CATEGORIES.map((c) => recallCell(t.score[c])).join(' | ')} | ${bytes} | ${t.summarizerCalls} | ${t.tokensIn} / ${t.tokensOut}${estimated} |`;
}

function strategiesCell(t: Tally): string {
  return (
    Object.entries(t.strategies)
      .map(([s, n]) => `${s} ${n}`)
      .join(', ') || '-'
  );
}

export function modeTable(results: readonly CaseResult[], modes: readonly Mode[]): string {
  const rows = [...byMode(results, modes)].map(
    ([m, t]) => `| ${m} | ${t.compacted}/${t.cases} | ${strategiesCell(t)} | ${t.condensedItems} | ${cells(t)}`,
  );
  const header = `| mode | compacted | strategy used | items condensed | ${COLUMNS}`;
  return [header, separator(header), ...rows].join('\n');
}

function sessionTable(results: readonly CaseResult[], modes: readonly Mode[]): string {
  const sessions = [...new Set(results.map((r) => r.session))];
  const rows = sessions.flatMap((s) => {
    const of = results.filter((r) => r.session === s);
    return [...byMode(of, modes)].map(([m, t]) => `| ${s} | ${of[0].api} | ${m} | ${t.compacted}/${t.cases} | ${cells(t)}`);
  });
  const header = `| session | API | mode | compacted | ${COLUMNS}`;
  return [header, separator(header), ...rows].join('\n');
}

function separator(header: string): string {
  return `|${'---|'.repeat(header.split('|').length - 2)}`;
}

export interface ReportMeta {
  modes: readonly Mode[];
  /** Who summarized: the stand-in, or a real model. */
  summarizer: string;
  gate?: Gate;
}

/** Both tables with what they measure, for the terminal and for BENCHMARKS.md. */
export function renderReport(evaluation: Evaluation, meta: ReportMeta): string {
  const { results, fitShare, aimShare } = evaluation;
  const points = [...new Set(results.map((r) => `${Math.round(r.at * 100)}%`))].join(', ');
  const sessions = new Set(results.map((r) => r.session)).size;
  const intro = [
    `${sessions} sessions, each compacted at ${points} of its turns by \`compact()\` in-process: the body must come under ${Math.round(fitShare * 100)}% of its size (aim ${Math.round(aimShare * 100)}%).`,
    `Summarizer: ${meta.summarizer}.`,
    'Modes: `mask` (`compaction.mask: true`), `summarize` (`mask: false`), `fallback` (`strategy: fallback`).',
    "A probe is a path (path arguments of tool calls, files named in shell commands), a shell command (its first line, at most 120 characters), an identifier (CamelCase or snake_case in assistant text and short tool arguments), an error (the first error line of a tool result) or a constraint (a sentence of the user's with don't, never, must, always, only, keep...), read off the items the compaction replaced; it is kept when the compacted request still carries it verbatim.",
    "Summary bytes: text the compaction wrote (summary, placeholders). Tokens: what the answers' usage says, else characters / 4 (est.).",
  ];
  if (meta.gate)
    intro.push(
      `Gate: ${meta.gate.categories.join(' and ')} recall at least ${percent(meta.gate.minRecall)} in ${meta.gate.modes.join(', ')}.`,
    );
  const lines = wrap(intro.join(' '), WIDTH);
  return [lines.join('\n'), '', modeTable(results, meta.modes), '', sessionTable(results, meta.modes)].join('\n');
}

const WIDTH = 100;

/** `text` in lines of at most `width` characters, broken at spaces. */
function wrap(text: string, width: number): string[] {
  const lines: string[] = [];
  let line = '';
  for (const word of text.split(' ')) {
    if (line && line.length + 1 + word.length > width) {
      lines.push(line);
      line = word;
    } else {
      line = line ? `${line} ${word}` : word;
    }
  }
  if (line) lines.push(line);
  return lines;
}

/** Up to `n` missed probes per mode and category, for a reader looking for what went. */
export function missedExamples(results: readonly CaseResult[], modes: readonly Mode[], n: number): string {
  const out: string[] = [];
  for (const [mode, t] of byMode(results, modes)) {
    for (const c of CATEGORIES) {
      const missed = [...new Set(t.score[c].missed)];
      if (missed.length === 0) continue;
      out.push(
        `${mode} ${c}: ${missed
          .slice(0, n)
          .map((p) => JSON.stringify(p))
          .join(', ')}${missed.length > n ? `, and ${missed.length - n} more` : ''}`,
      );
    }
  }
  return out.join('\n');
}
