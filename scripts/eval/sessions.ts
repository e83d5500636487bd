import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { Api } from '../../src/dialects/types.js';
import { generateScript, requestOf } from './generate.js';

/*
 * The requests a compaction is forced on: each session as it stood at 40%, 60%, 80% and 100% of
 * its turns. Recorded sessions are the agents' own bodies (test/fixtures/agent-sessions), one
 * file per turn; generated ones are cut after their k-th step.
 */

export interface EvalCase {
  session: string;
  api: Api;
  /** How far into the session: 0.4 is the request at 40% of its turns. */
  at: number;
  request: Record<string, unknown>;
}

const POINTS = [0.4, 0.6, 0.8, 1] as const;

const ROOT = fileURLToPath(new URL('../../test/fixtures/agent-sessions/', import.meta.url));

/** The recorded sessions and their APIs (test/fixtures/agent-sessions/README.md). */
export const RECORDED: Readonly<Record<string, Api>> = {
  pi: 'chat',
  opencode: 'chat',
  codex: 'responses',
  claude: 'messages',
  'claude-thinking': 'messages',
  gemini: 'gemini',
  // pi's 40-turn session, cut after each tool result (pi only appends).
  'pi-long': 'chat',
};

export interface GeneratedSpec {
  seed: number;
  api: Exclude<Api, 'gemini'>;
  steps: number;
}

/** What `npm run eval:summary` generates: six chat sessions, one in Messages, one in Responses. */
export const GENERATED: readonly GeneratedSpec[] = [
  ...[1, 2, 3, 4, 5, 6].map((seed) => ({ seed, api: 'chat' as const, steps: 30 + ((seed * 7) % 20) })),
  { seed: 7, api: 'messages', steps: 40 },
  { seed: 8, api: 'responses', steps: 40 },
];

export function recordedCases(names: readonly string[] = Object.keys(RECORDED), points: readonly number[] = POINTS): EvalCase[] {
  return names.flatMap((session) => {
    const api = RECORDED[session];
    if (!api) throw new Error(`no recorded session ${JSON.stringify(session)}; there are ${Object.keys(RECORDED).join(', ')}`);
    const turns = turnsOf(session);
    return points.map((at) => ({ session, api, at, request: turns[turnAt(at, turns.length)] }));
  });
}

export function generatedName(spec: GeneratedSpec): string {
  return `generated-${spec.api}-${spec.seed}`;
}

export function generatedCases(specs: readonly GeneratedSpec[] = GENERATED, points: readonly number[] = POINTS): EvalCase[] {
  return specs.flatMap((spec) => {
    const script = generateScript(spec.seed, spec.steps);
    return points.map((at) => ({
      session: generatedName(spec),
      api: spec.api,
      at,
      request: requestOf(script, spec.api, turnAt(at, script.steps.length) + 1),
    }));
  });
}

/** The index of the turn at share `at` of `n` turns (at least the first). */
function turnAt(at: number, n: number): number {
  return Math.min(n, Math.max(1, Math.round(at * n))) - 1;
}

function turnsOf(session: string): Record<string, unknown>[] {
  if (session === 'pi-long') {
    const last = readJson('pi/long-40-turns.json') as { messages: { role: string }[] };
    const ends = last.messages.flatMap((m, i) => (m.role === 'tool' ? [i + 1] : []));
    return ends.map((end) => ({ ...last, messages: last.messages.slice(0, end) }));
  }
  const files = readdirSync(`${ROOT}${session}`)
    .filter((f) => /^\d\d-main\.json$/.test(f))
    .sort();
  return files.map((f) => readJson(`${session}/${f}`) as Record<string, unknown>);
}

function readJson(path: string): unknown {
  return JSON.parse(readFileSync(`${ROOT}${path}`, 'utf8'));
}
