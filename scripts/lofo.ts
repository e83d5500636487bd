/**
 * Leave one family out: how well does the classifier recognise a provider it has no rules for?
 * For each wording family in test/fixtures/upstream-errors.json, build a classifier without
 * that family's specific rules and classify its fixtures; then one with no specific rule at
 * all ("general layer only") and classify all of them. `npm run classify:lofo` prints the table that
 * test/fixtures/README.md quotes; test/overlong/lofo.test.ts asserts the targets.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { createClassifier, type Classifier, type Verdict } from '../src/overlong/classify.js';
import { RULES, type Rule } from '../src/overlong/rules.js';

export interface LofoFixture {
  id: string;
  family: string;
  status: number;
  content_type: string;
  body: string;
  overlong: boolean;
  in_stream: boolean;
}

export interface LofoRow {
  family: string;
  fixtures: number;
  overlong: number;
  /** Verdicts equal to the label (overlong and reason, or not overlong). */
  right: number;
  /** Overlong fixtures called overlong. */
  recognised: number;
  /** Not-overlong fixtures called overlong. */
  falseAlarms: number;
  /** Ids of the fixtures it got wrong. */
  wrong: string[];
}

/** Both fixture files: the e2e table's, and the overflows whose windows no test request fits in. */
export const FIXTURE_FILES = [
  new URL('../test/fixtures/upstream-errors.json', import.meta.url),
  new URL('../test/fixtures/upstream-errors-small-window.json', import.meta.url),
];

export function loadFixtures(): LofoFixture[] {
  return FIXTURE_FILES.flatMap((url) => JSON.parse(readFileSync(url, 'utf8')) as LofoFixture[]);
}

/** The gateway's specific rules less those of `families`. */
export function rulesWithout(...families: string[]): Rule[] {
  return RULES.filter((r) => !families.includes(r.family));
}

export function classifyWith(f: LofoFixture, classifier: Classifier): Verdict {
  return f.in_stream
    ? classifier.classifyStreamEvent(f.body)
    : classifier.classifyResponse({ status: f.status, contentType: f.content_type, body: f.body });
}

function isRight(f: LofoFixture, v: Verdict): boolean {
  if (!v.overlong) return !f.overlong;
  return f.overlong && v.reason === (f.status === 413 ? 'body_too_large' : 'context_length');
}

export function score(family: string, fixtures: readonly LofoFixture[], classifier: Classifier): LofoRow {
  const row: LofoRow = { family, fixtures: fixtures.length, overlong: 0, right: 0, recognised: 0, falseAlarms: 0, wrong: [] };
  for (const f of fixtures) {
    const v = classifyWith(f, classifier);
    if (f.overlong) row.overlong++;
    if (f.overlong && v.overlong) row.recognised++;
    if (!f.overlong && v.overlong) row.falseAlarms++;
    if (isRight(f, v)) row.right++;
    else row.wrong.push(f.id);
  }
  return row;
}

/** One row per family (its own rules off), then the general layer alone over every fixture. */
export function lofoTable(fixtures: readonly LofoFixture[] = loadFixtures()): { families: LofoRow[]; generalOnly: LofoRow } {
  const names = [...new Set(fixtures.map((f) => f.family))].sort();
  const families = names.map((family) =>
    score(
      family,
      fixtures.filter((f) => f.family === family),
      createClassifier(rulesWithout(family)),
    ),
  );
  return { families, generalOnly: score('general layer only', fixtures, createClassifier([])) };
}

export function formatTable({ families, generalOnly }: ReturnType<typeof lofoTable>): string {
  const line = (r: LofoRow) =>
    `| ${r.family} | ${r.fixtures} | ${r.overlong} | ${r.recognised}/${r.overlong} | ${r.right}/${r.fixtures} | ${r.falseAlarms} |` +
    ` ${r.wrong.join(', ')} |`;
  return [
    '| family (its rules off) | fixtures | overlong | overlong recognised | right | false alarms | wrong |',
    '|---|---|---|---|---|---|---|',
    ...families.map(line),
    line(generalOnly),
  ].join('\n');
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const table = lofoTable();
  console.log(formatTable(table));
  const g = table.generalOnly;
  const share = g.overlong === 0 ? 1 : g.recognised / g.overlong;
  console.log(`\ngeneral layer only: ${(100 * share).toFixed(1)}% of overlong fixtures recognised, ${g.falseAlarms} false alarms`);
}
