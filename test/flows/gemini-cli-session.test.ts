import { describe, expect, it } from 'vitest';
import { boundFigures, OVERFLOW, runBoundSession, type BoundRun, expectSentAsIsUntilOverflow } from '../helpers/bound-session-replay.js';
import { parseCompactionHeader } from '../helpers/rescue.js';
import type { LimitStyle } from '../helpers/session-replay.js';

/*
 * The recorded Gemini CLI session (13 requests to :streamGenerateContent?alt=sse, the model in the
 * path, the whole history resent each turn) replayed through the gateway against the strict Gemini
 * stand-in, with Gemini CLI's headers, re-signed as Gemini CLI returns what it got: before each
 * turn, every earlier model turn's functionCall carries the thoughtSignature the stand-in issued
 * when it answered that turn, and the stand-in answers each turn with the recorded next call (same
 * id, name and args, same text), so the recorded functionResponse still answers it. Behind a limit
 * the 8th request is the first to pass, the session is rescued once and then sent compacted ahead:
 * the only refusal is the overflow, and the newest model turn (whose signature the API checks) goes
 * back byte for byte every turn.
 */

const models = (body: any) => (body.contents as any[]).filter((c) => c.role === 'model');
const newestModel = (body: any) => models(body).at(-1);

function expectReSigned(run: BoundRun): void {
  // The body of turn i+1 carries the stand-in's answer to turn i as it came: the recorded text,
  // the recorded call, the stand-in's signature.
  for (const t of run.turns.slice(0, -1)) {
    expect(
      t.answer.map((p) => Object.keys(p)),
      `answer to turn ${t.turn}`,
    ).toEqual([['text'], ['functionCall', 'thoughtSignature']]);
    expect(models(run.bodies[t.turn])[t.turn - 1].parts, `answer to turn ${t.turn}`).toEqual(t.answer);
    const call = t.answer[1].functionCall;
    expect(run.bodies[t.turn].contents.at(-1).parts[0].functionResponse).toMatchObject({ id: call.id, name: call.name });
  }
  expect(run.turns.at(-1)!.answer).toEqual([{ text: 'ALL DONE' }]);
  expectSentAsIsUntilOverflow(run);
}

describe.each<LimitStyle>(['413', 'window'])('the recorded Gemini CLI session, behind a %s limit', (style) => {
  it('every turn answered; rescued once, then compacted ahead; the newest model turn sent byte for byte', async () => {
    const run = await runBoundSession('gemini', style);
    expect(run.turns.map((t) => [t.turn, t.status, t.finished])).toEqual(run.turns.map((_, i) => [i + 1, 200, true]));
    expectReSigned(run);

    // The only refusal is the overflow itself: no signature, pairing or shape refusal.
    const refusals = run.turns.flatMap((t) => t.checks.map((c) => c.refused)).filter((r) => r !== null);
    expect(refusals).toEqual([expect.stringMatching(OVERFLOW)]);
    expect(run.turns[7].checks[0].refused).toMatch(
      style === '413'
        ? /^413 Request Entity Too Large$/
        : /^The input token count \(\d+\) exceeds the maximum number of tokens allowed \(\d+\)\.$/,
    );
    expect(boundFigures(run).bindingRefusals).toEqual([]);

    const [rescue, ...later] = run.turns.slice(7);
    expect(parseCompactionHeader(rescue.header)).toMatchObject({
      outcome: 'replayed',
      reason: style === '413' ? 'body_too_large' : 'context_length',
    });
    expect(rescue.calls).toHaveLength(2);
    for (const t of later) {
      expect(parseCompactionHeader(t.header), `turn ${t.turn}`).toMatchObject({ outcome: 'compacted', trigger: 'proactive' });
      expect(t.calls).toHaveLength(1);
    }
    for (const t of run.turns.slice(7)) {
      const sent = t.calls.at(-1)!;
      const body = run.bodies[t.turn - 1];
      expect(sent.bytes, `turn ${t.turn}`).toBeLessThanOrEqual(run.report.limit);
      // The newest model turn whole, its signature byte for byte; every kept model turn as sent.
      expect(newestModel(sent.body), `turn ${t.turn}`).toEqual(newestModel(body));
      expect(sent.raw.toString('utf8')).toContain(JSON.stringify(newestModel(body)));
      const original = new Set(models(body).map((m) => JSON.stringify(m)));
      for (const m of models(sent.body)) expect(original.has(JSON.stringify(m)), `turn ${t.turn}: a model turn changed`).toBe(true);
      // Everything but contents as Gemini CLI sent it.
      const { contents: _a, ...fields } = body;
      const { contents: _b, ...sentFields } = sent.body;
      expect(sentFields).toEqual(fields);
    }

    const r = run.report;
    console.log(
      `gemini behind a ${style} limit: ${r.summarizerCalls} summarizer calls for ${r.overflowingTurns} overflowing turns, stable prefix ${r.stablePrefixTurns}/${r.compactedTurns - 1}`,
    );
    expect(r.answered).toBe(13);
    expect(r.lastWhole).toBe(true);
    expect(r.cuts).toBe(0);
    expect(r.maxSentOverRefused).toBe(0);
    expect(r.summarizerPerOverflow).toBeLessThanOrEqual(0.35);
  });
});
