import { afterEach, describe, expect, it } from 'vitest';
import { startGateway, type TestGateway } from '../helpers/gateway.js';
import { startStandIn, type StandIn } from '../helpers/provider.js';
import { headerOf, type ApiFixture } from '../scenarios/apis/fixture.js';
import { messagesFixture } from '../scenarios/apis/messages.js';
import { responsesFixture } from '../scenarios/apis/responses.js';

/*
 * An agent's own compaction call (src/rescue/agent-compaction.ts), overflowing: Codex's marked
 * `request_kind: "compaction"` in its turn metadata, Claude Code's a Messages call whose newest
 * turn is its summary instruction. Made to fit with no summarizer call of the gateway's, the
 * agent's instruction kept whole, and nothing remembered from it; the same request without the
 * mark is summarised as any other.
 */

const TURNS = 10;
/** Codex's turn metadata header, as test/fixtures/agent-sessions/codex/headers.json has it, for a call of `kind`. */
const codexMetadata = (kind: string) =>
  JSON.stringify({
    session_id: '01a22b40-0a8b-7481-be18-34974601d245',
    thread_id: '01a22b40-0a8b-7481-be18-34974601d245',
    window_id: '01a22b40-0a8b-7481-be18-34974601d245:0',
    request_kind: kind,
    model: 'fake-model',
  });
const CLAUDE_INSTRUCTION =
  "Your task is to create a detailed summary of the conversation so far, paying close attention to the user's explicit requests and your previous actions.";

let standIn: StandIn | undefined;
let gateway: TestGateway | undefined;
afterEach(async () => {
  await gateway?.close();
  await standIn?.close();
  gateway = standIn = undefined;
});

interface Case {
  name: string;
  f: ApiFixture;
  /** The agent's compaction call: its body, and its headers. */
  compaction(body: any): { body: any; headers: Record<string, string> };
  /** The same conversation as an ordinary turn. */
  ordinary(body: any): { body: any; headers: Record<string, string> };
  /** The agent's own instruction in a wire body. */
  instruction(wire: any): unknown;
}

const CASES: Case[] = [
  {
    name: 'Codex (request_kind: compaction)',
    f: responsesFixture,
    compaction: (body) => ({ body, headers: { 'x-codex-turn-metadata': codexMetadata('compaction') } }),
    ordinary: (body) => ({ body, headers: { 'x-codex-turn-metadata': codexMetadata('turn') } }),
    instruction: (wire) => wire.input.at(-1),
  },
  {
    name: 'Claude Code (its summary instruction as the newest turn)',
    f: messagesFixture,
    compaction: (body) => ({ body: withNewestUserText(body, CLAUDE_INSTRUCTION), headers: {} }),
    ordinary: (body) => ({ body: withNewestUserText(body, 'And now the tests, please.'), headers: {} }),
    instruction: (wire) => wire.messages.at(-1),
  },
];

/** A Messages body that ends with its last tool results and, in the same turn, `text` (the model's remark and the next question dropped). */
function withInstructionBesideToolResults(body: any, text: string): any {
  const messages = body.messages.slice(0, -2);
  const last = messages.at(-1);
  messages[messages.length - 1] = { ...last, content: [...last.content, { type: 'text', text }] };
  return { ...body, messages };
}

/** A Messages body whose newest user turn ends with `text` (a turn of its own after a tool result). */
function withNewestUserText(body: any, text: string): any {
  const messages = [...body.messages];
  const last = messages.at(-1);
  const content = typeof last.content === 'string' ? [{ type: 'text', text: last.content }] : [...last.content];
  messages[messages.length - 1] = { ...last, content: [...content.filter((b: any) => b.type !== 'text'), { type: 'text', text }] };
  return { ...body, messages };
}

describe.each(CASES.map((c) => [c.name, c] as const))('%s', (_name, c) => {
  const { f } = c;
  const body = f.request(TURNS);
  const limitBytes = Math.floor(Buffer.byteLength(JSON.stringify(f.wire(body, false))) * 0.7);

  // Masking off: every compaction is the summarizer's or the digest's, so the difference shows.
  async function start(): Promise<string> {
    standIn = await startStandIn({
      limitBytes,
      tooLong: 'stated',
      summarizer: { status: 500, json: { error: { message: 'no summary here' } } },
    });
    gateway = await startGateway({
      upstream: { url: f.upstreamUrl(standIn) },
      memory: { shareAnonymous: true },
      compaction: { mask: false },
    });
    return gateway.origin;
  }

  it('overflowing, it is made to fit with no summarizer call, its instruction whole, and nothing is remembered of it', async () => {
    const origin = await start();
    const call = c.compaction(body);
    const wire = f.wire(call.body, false);
    const res = await f.post(origin, JSON.stringify(wire), { stream: false, headers: call.headers });
    expect(res.status).toBe(200);
    const header = headerOf(res.headers.get('x-gateway-compaction'));
    expect(header).toMatchObject({ outcome: 'replayed', trigger: 'rejected', 'agent-compaction': 1 });
    expect(header!.strategy).toBe('fallback');
    expect(header).not.toHaveProperty('summarizer-failure');
    expect(standIn!.summarizerCalls()).toEqual([]);
    const [, replay] = standIn!.calls();
    expect(standIn!.verdicts(f.api)).toEqual([expect.stringMatching(/./), null]);
    expect(c.instruction(replay.json)).toEqual(c.instruction(wire));
    expect(f.brokenPairs(replay.json)).toEqual([]);
    // The next ordinary turn extends nothing the gateway remembered: it is not compacted ahead from memory.
    const next = c.ordinary(body);
    const again = await f.post(origin, JSON.stringify(f.wire(next.body, false)), { stream: false, headers: next.headers });
    expect(again.status).toBe(200);
    expect(headerOf(again.headers.get('x-gateway-compaction'))).not.toMatchObject({ trigger: 'proactive' });
  });

  if (c.f.api === 'messages') {
    it('an instruction too long to fit beside what must be kept is never cut: the call goes unrescued, not mangled', async () => {
      const origin = await start();
      // Claude Code's instruction runs to 6.5k characters; here it alone is most of the limit.
      const long = `${CLAUDE_INSTRUCTION}\n${'Include every file name, every decision and every error. '.repeat(Math.ceil((limitBytes * 0.8) / 58))}`;
      // As Claude Code sends it: the instruction in the same user turn as the last tool results.
      const call = { body: withInstructionBesideToolResults(body, long), headers: {} };
      const wire = f.wire(call.body, false);
      const res = await f.post(origin, JSON.stringify(wire), { stream: false, headers: call.headers });
      const header = headerOf(res.headers.get('x-gateway-compaction'));
      expect(header).toMatchObject({ 'agent-compaction': 1 });
      // Whatever went upstream after the refusal carries the instruction whole, or nothing went.
      for (const sent of standIn!.calls().slice(1)) expect(JSON.stringify(sent.json)).toContain(JSON.stringify(long).slice(1, -1));
      if (header!.outcome !== 'replayed') expect(res.status).toBe(400);
    });
  }

  it('the same conversation as an ordinary turn is summarised as any other', async () => {
    const origin = await start();
    const call = c.ordinary(body);
    const res = await f.post(origin, JSON.stringify(f.wire(call.body, false)), { stream: false, headers: call.headers });
    expect(headerOf(res.headers.get('x-gateway-compaction'))).not.toHaveProperty('agent-compaction');
    // The summarizer was asked (and failed, as scripted here, so the digest stood in).
    expect(standIn!.summarizerCalls().length).toBeGreaterThan(0);
    expect(headerOf(res.headers.get('x-gateway-compaction'))).toMatchObject({
      outcome: 'replayed',
      'summarizer-failure': expect.any(String),
    });
  });
});
