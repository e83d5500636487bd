import { describe, expect, it } from 'vitest';
import {
  BOUND_VARIANTS,
  boundFigures,
  expectPrefixChangesExplained,
  OVERFLOW,
  runBoundSession,
  type BoundRun,
  type BoundTurn,
  expectSentAsIsUntilOverflow,
} from '../helpers/bound-session-replay.js';
import { parseCompactionHeader } from '../helpers/rescue.js';
import type { ReasoningCheck } from '../helpers/strict-responses.js';

/*
 * The recorded Codex CLI session (13 requests to /v1/responses, store: false, the whole history
 * resent each turn) replayed through the gateway against the strict Responses stand-in, with
 * Codex's headers, as Codex sends it with include: ["reasoning.encrypted_content"]: before each
 * turn, every earlier answer goes back as the stand-in issued it (its message, its reasoning item
 * right before its function_call, the call with the stand-in's id), and the stand-in answers each
 * turn with the recorded next call. Behind a limit the 8th request is the first to pass, the
 * gateway strips nothing: the provider drops the stale reasoning of the kept tail and says so, and
 * nothing made under the compacted prefix a turn is sent with is ever dropped.
 */

function expectReSigned(run: BoundRun): void {
  // Turn i+1 carries the answer to turn i as it came, its call answered by the recorded output.
  for (const t of run.turns.slice(0, -1)) {
    const [message, reasoning, call] = t.answer;
    expect([message.type, reasoning.type, call.type]).toEqual(['message', 'reasoning', 'function_call']);
    const input = run.bodies[t.turn].input as any[];
    const at = input.findIndex((item) => item.id === reasoning.id);
    expect(input.slice(at - 1, at + 3), `answer to turn ${t.turn}`).toEqual([
      ...t.answer,
      expect.objectContaining({ type: 'function_call_output', call_id: call.call_id }),
    ]);
  }
  expectSentAsIsUntilOverflow(run);
}

/*
 * By default the rescue masks old tool outputs (every item stays, the provider still drops the
 * stale reasoning); when masking is not enough the conversation is summarised. With masking off
 * the summary path is the only one, as before.
 */
const variants = BOUND_VARIANTS;

describe.each(variants)('the recorded Codex session with reasoning, behind a %s limit, %s', (style, variant, config, strategy) => {
  it('every turn answered; the stale reasoning of the kept tail dropped and counted, none made under the prefix', async () => {
    const run = await runBoundSession('codex-reasoning', style, config);
    expect(run.turns.map((t) => [t.turn, t.status, t.finished])).toEqual(run.turns.map((_, i) => [i + 1, 200, true]));
    expectReSigned(run);
    const checks = run.turns.flatMap((t) => t.checks) as ReasoningCheck[];
    expect(checks.filter((c) => c.refused !== null).map((c) => c.refused)).toEqual([expect.stringMatching(OVERFLOW)]);

    const [rescue, ...later] = run.turns.slice(7);
    const header = parseCompactionHeader(rescue.header);
    expect(header).toMatchObject({ outcome: 'replayed', strategy, 'reasoning-dropped': expect.any(Number) });
    expect(header['thinking-stripped'], 'the gateway strips nothing of the Responses API').toBeUndefined();
    for (const t of later)
      expect(parseCompactionHeader(t.header), `turn ${t.turn}`).toMatchObject({ outcome: 'compacted', trigger: 'proactive' });

    const f = boundFigures(run);
    console.log(
      `codex-reasoning behind a ${style} limit, ${variant}: reasoning items dropped per compacted turn (turns ${f.compacted.join(', ')}): header [${f.dropped.join(', ')}], stand-in [${f.removed.join(', ')}]`,
    );
    expect(f.compacted).toEqual([8, 9, 10, 11, 12, 13]);
    expect(f.bindingRefusals).toEqual([]);
    // What the header says the provider dropped is what the stand-in dropped, turn by turn.
    expect(f.dropped).toEqual(f.removed);
    expect(f.stripped).toEqual(f.compacted.map(() => 0));
    // The first compaction: the kept tail's reasoning was made before the compacted prefix, and goes.
    expect(f.dropped[0]).toBeGreaterThanOrEqual(1);
    for (const id of (rescue.checks.at(-1) as ReasoningCheck).removed) expect(run.issuedAt.get(id), id).toBeLessThan(8);
    // Later: nothing made under the turn's own prefix is dropped. Under the same prefix the same stale
    // items go again; a new prefix is a summary (the header shows the summarizer ran) or more old
    // outputs masked (memory extended, no summarizer call).
    expect(f.freshLost).toEqual(f.compacted.map(() => 0));
    const removed = (t: BoundTurn) => (t.checks.at(-1) as ReasoningCheck).removed;
    expectPrefixChangesExplained(run, f, (t, previous) => expect(removed(t), `turn ${t.turn}`).toEqual(removed(previous)));
  });
});
