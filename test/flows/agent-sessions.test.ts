import { describe, expect, it } from 'vitest';
import { runSession } from '../../bench/agents.js';
import type { Agent, LimitStyle } from '../helpers/session-replay.js';

/*
 * Real agent sessions (the bodies pi, opencode, Codex CLI and Claude Code sent), replayed turn by turn through
 * the gateway against an upstream that refuses anything past the 8th request's size: every turn
 * is answered, the newest item always survives whole, nothing kept is cut, the compacted prefix
 * stays byte-stable between summaries, and no body the gateway makes is at or over a size the
 * upstream already refused. `npm run bench:agents` prints the same figures.
 */

const cases: Array<[Agent, LimitStyle]> = [
  ['pi', '413'],
  ['pi', 'window'],
  ['opencode', '413'],
  ['opencode', 'window'],
  ['codex', '413'],
  ['codex', 'window'],
  ['claude', '413'],
  ['claude', 'window'],
  ['pi-long', '413'],
  ['pi-long', 'window'],
];

describe.each(cases)('%s against a %s limit', (agent, style) => {
  it('every turn answered, the last item whole, no cut, a stable prefix, few summaries, nothing over a refused size', async () => {
    const r = await runSession(agent, style);
    expect(r.answered).toBe(r.turns);
    expect(r.overflowingTurns).toBeGreaterThan(4);
    // One rejected round trip in the whole session: after it, memory sends turns compacted ahead.
    expect(r.upstreamCalls).toBe(r.turns + 1);
    expect(r.summarizerPerOverflow).toBeLessThanOrEqual(0.35);
    expect(r.lastWhole).toBe(true);
    expect(r.cuts).toBe(0);
    expect(r.maxSentOverRefused).toBe(0);
    expect(r.stablePrefixTurns).toBeGreaterThanOrEqual(Math.floor((r.compactedTurns - 1) / 2));
    // Every compacted turn says so in its header, and each is under the limit.
    for (const t of r.results.filter((x) => x.originalBytes > r.limit)) {
      expect(t.header).toMatch(/outcome=(replayed|compacted)/);
      expect(t.calls.at(-1)!.bytes).toBeLessThanOrEqual(r.limit);
    }
  }, 60_000);
});

describe('the long pi session behind an nginx that refuses anything over 92,000 bytes (no limit stated)', () => {
  /** 40/40, and what the gateway sends learns from each refusal. */
  function expectLearnsFromRefusals(r: Awaited<ReturnType<typeof runSession>>): void {
    expect(r.answered).toBe(40);
    expect(r.maxSentOverRefused).toBe(0);
    expect(r.summarizerPerOverflow).toBeLessThanOrEqual(0.35);
    // What the gateway sends learns from each refusal: at most one of its own bodies is refused
    // (the limit is only known to be under the first refused size), and never one at a size known to fail.
    const madeAndRefused = r.results.flatMap((t) => t.calls.filter((c) => c.bytes !== t.originalBytes && c.refused));
    expect(madeAndRefused.length).toBeLessThanOrEqual(1);
    expect(r.results.at(-1)!.header).toMatch(/limit=learned/);
  }

  it('finishes 40/40 and never sends a body at or over a size already refused, masking old tool outputs (the default)', async () => {
    const r = await runSession('pi-long', '413', {}, 92_000);
    expectLearnsFromRefusals(r);
    const compacted = r.results.filter((t) => t.header !== null && /outcome=(replayed|compacted)/.test(t.header));
    expect(compacted.length).toBeGreaterThan(0);
    for (const t of compacted) expect(t.header).toMatch(/strategy=(mask|summarize)\b/);
    expect(r.results.at(-1)!.header).toMatch(/strategy=mask\b/);
    expect(r.results.at(-1)!.calls.at(-1)!.raw.toString()).toContain('[tool output omitted by compaction-gateway: ');
  }, 60_000);

  it('finishes 40/40 and never sends a body at or over a size already refused, however the summary is reused', async () => {
    // Masking off: the summary is made, and reused.
    const r = await runSession('pi-long', '413', { compaction: { mask: false } }, 92_000);
    expectLearnsFromRefusals(r);
    // The summary made over and over stays bounded, and still carries the task and the first files read.
    const last = r.results.at(-1)!.calls.at(-1)!.body.messages;
    const summary = last.find((m: any) => typeof m.content === 'string' && m.content.startsWith('[compaction-gateway]'));
    expect(summary.content).toMatch(/Task: review every TypeScript file/);
    expect(summary.content.length).toBeLessThan(2_000 * 4);
  }, 60_000);
});
