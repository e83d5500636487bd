import { startGateway } from '../test/helpers/gateway.js';
import { limitAt, replaySession, startAgentUpstream, turnsOf, type Agent, type LimitStyle, type SessionReport } from '../test/helpers/session-replay.js';

/*
 * npm run bench:agents: each recorded agent session replayed turn by turn through the gateway,
 * against an upstream that refuses any body past the size of the session's 8th request (an nginx
 * 413 that states no limit, and a 400 that states the window), with a scripted summarizer.
 * Loopback only; every loop is bounded by the session's length.
 */

export const AGENTS: Agent[] = ['pi', 'opencode', 'codex', 'claude', 'pi-long'];
export const STYLES: LimitStyle[] = ['413', 'window'];

export async function runSession(agent: Agent, style: LimitStyle, config: Record<string, unknown> = {}, limitBytes?: number): Promise<SessionReport> {
  const turns = turnsOf(agent);
  const limit = limitBytes ?? limitAt(turns, 8);
  const upstream = await startAgentUpstream(agent, style, limit);
  const gateway = await startGateway({ upstream: { url: upstream.baseUrl }, summarizer: { maxInputTokens: 500_000 }, log: { level: 'silent' }, ...config });
  try {
    return await replaySession(agent, style, gateway.baseUrl, upstream, limit);
  } finally {
    await gateway.close();
    await upstream.close();
  }
}

export function row(r: SessionReport): string {
  const kb = (n: number) => `${(n / 1000).toFixed(0)} KB`;
  return `| ${r.agent} | ${r.style} | ${kb(r.limit)} | ${r.answered}/${r.turns} | ${r.upstreamCalls} | ${kb(r.rejectedBytes)} | ${r.summarizerCalls} / ${r.overflowingTurns} = ${r.summarizerPerOverflow.toFixed(2)} | ${r.stablePrefixTurns}/${Math.max(0, r.compactedTurns - 1)} | ${r.cuts} | ${r.lastWhole ? 'yes' : 'NO'} | ${r.maxSentOverRefused === 0 ? 'none' : `${r.maxSentOverRefused} B over`} | ${r.maxSummaryChars} |`;
}

export const HEADER =
  '| session | limit | refuses over | answered | upstream calls | rejected bytes | summarizer calls / overflowing turns | stable prefix | cuts | last item whole | sent at/over a refused size | largest summary (chars) |\n' +
  '|---|---|---|---|---|---|---|---|---|---|---|---|';

if (import.meta.url === `file://${process.argv[1]}`) {
  const only = process.argv.slice(2).filter((a) => !a.startsWith('-')) as Agent[];
  console.log(HEADER);
  for (const agent of only.length ? only : AGENTS) {
    if (agent === 'claude' && !(await hasMessages())) continue;
    for (const style of STYLES) console.log(row(await runSession(agent, style)));
  }
  // The long session behind an nginx that refuses anything over 92,000 bytes and says no number.
  console.log(row(await runSession('pi-long', '413', {}, 92_000)));
}

async function hasMessages(): Promise<boolean> {
  try {
    await import('../src/dialects/messages.js' as string);
    return true;
  } catch {
    return false;
  }
}
