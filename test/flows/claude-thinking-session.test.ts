import { describe, expect, it } from 'vitest';
import {
  BOUND_VARIANTS,
  boundFigures,
  expectPrefixChangesExplained,
  OVERFLOW,
  runBoundSession,
  type BoundRun,
  expectSentAsIsUntilOverflow,
} from '../helpers/bound-session-replay.js';
import { parseCompactionHeader } from '../helpers/rescue.js';
import type { BindingCheck } from '../helpers/strict-anthropic.js';

/*
 * The recorded Claude Code session with thinking (13 requests, a signed thinking block opening every
 * assistant message, thinking adaptive) replayed through the gateway against the strict Anthropic
 * stand-in, with Claude Code's headers and query. Before each turn, every earlier assistant
 * message's thinking block is the one the stand-in issued for it, as Claude Code returns them; the
 * stand-in answers each turn with the recorded next step. Behind a limit the 8th request is the
 * first to pass, the session is rescued once and then sent compacted ahead: no binding refusal, no
 * invalid block, and only the blocks made before the compacted prefix existed are stripped.
 */

const assistants = (body: any) => (body.messages as any[]).filter((m) => m.role === 'assistant');

function expectReSigned(run: BoundRun): void {
  // The body of turn i+1 carries the stand-in's answer to turn i as it came: its thinking block, and
  // the recorded text and tool_use (so the recorded tool_result answers it).
  for (const t of run.turns.slice(0, -1))
    expect(assistants(run.bodies[t.turn])[t.turn - 1].content, `answer to turn ${t.turn}`).toEqual(t.answer);
  expectSentAsIsUntilOverflow(run);
}

/*
 * By default the rescue masks old tool outputs (every message stays, its stale thinking stripped);
 * when masking is not enough the conversation is summarised. With masking off the summary path is
 * the only one, as before.
 */
const variants = BOUND_VARIANTS;

/** The block `signature` sits where the agent sent it, after only what the agent sent: nothing before it changed. */
function inUnchangedOpening(sent: any[], original: any[], signature: string): boolean {
  const at = sent.findIndex((m) => Array.isArray(m.content) && m.content.some((b: any) => b.signature === signature));
  return at >= 0 && sent.slice(0, at + 1).every((m, i) => JSON.stringify(m) === JSON.stringify(original[i]));
}

describe.each(variants)('the recorded Claude Code session with thinking, behind a %s limit, %s', (style, variant, config, strategy) => {
  it('every turn answered; no binding refusal, no invalid block; stale thinking stripped, fresh kept', async () => {
    const run = await runBoundSession('claude-thinking', style, config);
    expect(run.turns.map((t) => [t.turn, t.status, t.finished])).toEqual(run.turns.map((_, i) => [i + 1, 200, true]));
    expectReSigned(run);

    // The only refusal is the overflow itself; no block the request did not allow to drop.
    const checks = run.turns.flatMap((t) => t.checks) as BindingCheck[];
    expect(checks.filter((c) => c.refused !== null).map((c) => c.refused)).toEqual([expect.stringMatching(OVERFLOW)]);
    expect(run.turns[7].checks[0].refused).toMatch(OVERFLOW);
    for (const check of checks)
      if (check.invalid.length > 0) expect(check, 'an invalid block the request did not allow to drop').toMatchObject({ dropBlock: true });

    const [rescue, ...later] = run.turns.slice(7);
    expect(parseCompactionHeader(rescue.header)).toMatchObject({
      outcome: 'replayed',
      strategy,
      'block-binding': 'none',
      'thinking-stripped': expect.any(Number),
    });
    expect(parseCompactionHeader(rescue.header)['thinking-stripped']).toBeGreaterThanOrEqual(1);
    expect(rescue.calls).toHaveLength(2);
    for (const t of later) {
      expect(parseCompactionHeader(t.header), `turn ${t.turn}`).toMatchObject({ outcome: 'compacted', trigger: 'proactive' });
      expect(t.calls).toHaveLength(1);
    }

    const f = boundFigures(run);
    console.log(
      `claude-thinking behind a ${style} limit, ${variant}: thinking blocks stripped per compacted turn (turns ${f.compacted.join(', ')}): [${f.stripped.join(', ')}]`,
    );
    expect(f.compacted).toEqual([8, 9, 10, 11, 12, 13]);
    expect(f.bindingRefusals).toEqual([]);
    expect(f.invalidNotAllowed).toBe(0);
    // A new prefix is a summary (the summary extended, or made afresh over a masked span) or more
    // old outputs masked; no other turn changes the prefix, and the header says which it was.
    expectPrefixChangesExplained(run, f);
    const compacted = run.turns.slice(7);
    // Nothing made under the prefix a turn was sent with is stripped; every block kept was made under
    // it, or sits in the opening nothing changed (masking leaves the messages before its first mask).
    expect(f.freshLost).toEqual(f.compacted.map(() => 0));
    for (const t of compacted) {
      const sent = t.calls.at(-1)!.body.messages;
      const original = run.bodies[t.turn - 1].messages;
      for (const signature of t.stateKept) {
        if (inUnchangedOpening(sent, original, signature)) continue;
        expect(run.turns[run.issuedAt.get(signature)! - 1].prefix, `turn ${t.turn}: a kept block made under another prefix`).toBe(t.prefix);
      }
    }
    // While the prefix holds, the same stale blocks go and one more fresh block stays each turn.
    compacted.forEach((t, n) => {
      if (n === 0 || f.newPrefix[n]) return;
      expect(f.stripped[n], `turn ${t.turn}`).toBe(f.stripped[n - 1]);
      expect(t.stateKept.length, `turn ${t.turn}`).toBe(compacted[n - 1].stateKept.length + 1);
    });
    expect(f.stripped.every((n) => n >= 1)).toBe(true);
  });
});
