import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { boundFigures, runBoundSession, type BoundFigures } from '../test/helpers/bound-session-replay.js';
import { startGateway } from '../test/helpers/gateway.js';
import {
  limitAt,
  replaySession,
  startAgentUpstream,
  turnsOf,
  type Agent,
  type BoundSession,
  type LimitStyle,
  type SessionReport,
} from '../test/helpers/session-replay.js';

/*
 * npm run bench:agents: each recorded agent session replayed turn by turn through the gateway,
 * against an upstream that refuses any body past the size of the session's 8th request (an nginx
 * 413 that states no limit, and a 400 that states the window), with a scripted summarizer.
 * Loopback only; every loop is bounded by the session's length.
 */

export const AGENTS_START = '<!-- bench:agents start -->';
export const AGENTS_END = '<!-- bench:agents end -->';
const AGENTS_INTRO = `## Real agent sessions (\`npm run bench:agents\`)

Each recorded session (the exact bodies pi, opencode, Codex CLI, Claude Code and Gemini CLI sent; see
test/fixtures/agent-sessions) replayed turn by turn through the gateway, against an upstream that
refuses any body past the size of the session's 8th request: an nginx 413 page that states no
limit, or a 400 that states the window. The summarizer is scripted; everything runs on loopback.
"stable prefix": compacted turns whose request, up to and including the summary, was
byte-identical to the previous compacted turn's. "sent at/over a refused size": bodies the gateway
made (replays, compactions ahead) at or over a size the upstream had already refused. Targets:
<= 0.35 summarizer calls per overflowing turn, the last item whole, no cut, every turn answered.
The last four rows replay Claude Code's session with thinking, Codex's with reasoning and Gemini
CLI's with thought signatures against the strict stand-ins (signed thinking and encrypted
reasoning bound to their prefix, the newest model turn's signatures checked, re-signed turn by
turn as the agents return them; Anthropic's own 413, an edge 413 for the Responses API, an edge
413 and the API's INVALID_ARGUMENT window for Gemini): thinking blocks the gateway stripped on
each compacted turn, reasoning items the provider dropped (the headers' \`reasoning-dropped\` /
the stand-in's count), and refusals of bound state (binding, signatures; target 0).
Masking (\`compaction.mask\`, the default) comes first; the rows marked "mask off" replay the same
sessions with it off, so that every compaction is a summary: what masking saves, at the same
answers, cuts and last items. The second table replays the sessions against the upstream that
states its window, with that window declared to the gateway (\`upstream.windows\`) or not: the
refused round trips a known window saves, and the silent cuts the gateway reported where the
upstream cut nothing (every answer counts the whole prompt; target 0).`;

export const AGENTS: Agent[] = ['pi', 'opencode', 'codex', 'claude', 'pi-long'];
export const STYLES: LimitStyle[] = ['413', 'window'];
export const BOUND: BoundSession[] = ['claude-thinking', 'codex-reasoning', 'gemini'];
/** Each bound session's limits: Gemini's stand-in states its window (INVALID_ARGUMENT) or sits behind an edge 413. */
const BOUND_STYLES: Record<BoundSession, LimitStyle[]> = { 'claude-thinking': ['413'], 'codex-reasoning': ['413'], gemini: STYLES };

export async function runSession(
  agent: Agent,
  style: LimitStyle,
  config: Record<string, unknown> = {},
  limitBytes?: number,
): Promise<SessionReport> {
  const turns = turnsOf(agent);
  const limit = limitBytes ?? limitAt(turns, 8);
  const upstream = await startAgentUpstream(agent, style, limit);
  const gateway = await startGateway({
    upstream: { url: upstream.baseUrl },
    summarizer: { maxInputTokens: 500_000 },
    log: { level: 'silent' },
    ...config,
  });
  try {
    return await replaySession(agent, style, gateway.baseUrl, upstream, limit);
  } finally {
    await gateway.close();
    await upstream.close();
  }
}

/**
 * A session against the upstream that states its window (`window`), with that window declared to
 * the gateway or not: how many requests the upstream refused, and how many answers the gateway
 * took for silent cuts (none is cut here: every answer counts the whole prompt).
 */
export async function runWindowed(
  agent: Agent,
  declared: boolean,
): Promise<{ report: SessionReport; refused: number; truncations: number }> {
  const turns = turnsOf(agent);
  const limit = limitAt(turns, 8);
  const upstream = await startAgentUpstream(agent, 'window', limit);
  const windows = declared ? [{ model: '*', tokens: Math.floor(limit / 4) }] : undefined;
  const gateway = await startGateway({
    upstream: { url: upstream.baseUrl, windows },
    summarizer: { maxInputTokens: 500_000 },
    log: { level: 'silent' },
  });
  try {
    const report = await replaySession(agent, 'window', gateway.baseUrl, upstream, limit);
    const refused = upstream.received.filter((r) => r.headers['x-gateway-compaction'] !== 'summarizer' && r.body.length > limit).length;
    const metrics = await (await fetch(`${gateway.origin}/metrics`)).text();
    const truncations = [...metrics.matchAll(/^gateway_truncations_total\{[^}]*\} (\d+)$/gm)].reduce((sum, m) => sum + Number(m[1]), 0);
    return { report, refused, truncations };
  } finally {
    await gateway.close();
    await upstream.close();
  }
}

export const WINDOWED_HEADER =
  '| session | window known ahead | answered | refused round trips | upstream calls | summarizer calls | cuts | last item whole | silent cuts reported |\n' +
  '|---|---|---|---|---|---|---|---|---|';

export function windowedRow(agent: Agent, declared: boolean, r: Awaited<ReturnType<typeof runWindowed>>): string {
  const { report } = r;
  return `| ${agent} | ${declared ? 'declared' : 'none'} | ${report.answered}/${report.turns} | ${r.refused} | ${report.upstreamCalls} | ${report.summarizerCalls} | ${report.cuts} | ${report.lastWhole ? 'yes' : 'NO'} | ${r.truncations} |`;
}

/** A row of the table; `bound` for a session against the strict stand-ins, whose state is bound to its prefix. */
export function row(r: SessionReport, bound?: BoundFigures): string {
  const kb = (n: number) => `${(n / 1000).toFixed(0)} KB`;
  return `| ${r.agent} | ${r.style} | ${kb(r.limit)} | ${r.answered}/${r.turns} | ${r.upstreamCalls} | ${kb(r.rejectedBytes)} | ${r.summarizerCalls} / ${r.overflowingTurns} = ${r.summarizerPerOverflow.toFixed(2)} | ${r.stablePrefixTurns}/${Math.max(0, r.compactedTurns - 1)} | ${r.cuts} | ${r.lastWhole ? 'yes' : 'NO'} | ${r.maxSentOverRefused === 0 ? 'none' : `${r.maxSentOverRefused} B over`} | ${r.maxSummaryChars} |${boundCells(bound)}`;
}

function boundCells(f?: BoundFigures): string {
  if (!f) return ' - | - | - |';
  const sum = (ns: number[]) => ns.reduce((a, b) => a + b, 0);
  return ` ${f.stripped.join(', ')} | ${sum(f.dropped)} / ${sum(f.removed)} (${f.dropped.join(', ')}) | ${f.bindingRefusals.length} |`;
}

export async function runBound(session: BoundSession, style: LimitStyle = '413'): Promise<string> {
  const run = await runBoundSession(session, style);
  return row(run.report, boundFigures(run));
}

export const HEADER =
  '| session | limit | refuses over | answered | upstream calls | rejected bytes | summarizer calls / overflowing turns | stable prefix | cuts | last item whole | sent at/over a refused size | largest summary (chars) | thinking stripped per compacted turn | reasoning dropped, header / stand-in (per compacted turn) | binding refusals |\n' +
  '|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|';

if (import.meta.url === `file://${process.argv[1]}`) {
  const args = process.argv.slice(2).filter((a) => !a.startsWith('-'));
  const only = args.filter((a) => !BOUND.includes(a as BoundSession)) as Agent[];
  const bound = args.filter((a) => BOUND.includes(a as BoundSession)) as BoundSession[];
  const rows = [HEADER];
  const print = (line: string) => {
    rows.push(line);
    console.log(line);
  };
  print(HEADER);
  rows.pop();
  for (const agent of only.length || bound.length ? only : AGENTS) {
    if (agent === 'claude' && !(await hasMessages())) continue;
    for (const style of STYLES) print(row(await runSession(agent, style)));
  }
  for (const agent of only.length || bound.length ? [] : AGENTS) {
    if (agent === 'claude' && !(await hasMessages())) continue;
    for (const style of STYLES)
      print(row(await runSession(agent, style, { compaction: { mask: false } })).replace(`| ${agent} |`, `| ${agent}, mask off |`));
  }
  // The long session behind an nginx that refuses anything over 92,000 bytes and says no number.
  print(row(await runSession('pi-long', '413', {}, 92_000)).replace('| pi-long | 413 |', '| pi-long | 413 at 92,000 B |'));
  for (const session of args.length ? bound : BOUND) {
    if (session === 'claude-thinking' && !(await hasMessages())) continue;
    for (const style of BOUND_STYLES[session]) print(await runBound(session, style));
  }
  // The same sessions with the window the upstream states declared ahead, beside none.
  rows.push('', WINDOWED_HEADER);
  console.log(`\n${WINDOWED_HEADER}`);
  for (const agent of only.length || bound.length ? only : AGENTS.filter((a) => a !== 'pi-long')) {
    if (agent === 'claude' && !(await hasMessages())) continue;
    for (const declared of [false, true]) print(windowedRow(agent, declared, await runWindowed(agent, declared)));
  }
  if (args.length === 0) writeSection(rows.join('\n'));
}

/** Replaces the agent-sessions section of BENCHMARKS.md (`npm run bench` keeps it). */
function writeSection(table: string): void {
  const file = fileURLToPath(new URL('../BENCHMARKS.md', import.meta.url));
  const text = existsSync(file) ? readFileSync(file, 'utf8') : '';
  const section = `${AGENTS_START}\n${AGENTS_INTRO}\n\n${table}\n${AGENTS_END}`;
  const at = text.indexOf(AGENTS_START);
  const end = text.indexOf(AGENTS_END);
  const next =
    at >= 0 && end > at ? text.slice(0, at) + section + text.slice(end + AGENTS_END.length) : `${text.trimEnd()}\n\n${section}\n`;
  writeFileSync(file, next);
  console.error(`bench:agents: wrote ${file}`);
}

async function hasMessages(): Promise<boolean> {
  try {
    await import('../src/dialects/messages.js');
    return true;
  } catch {
    return false;
  }
}
