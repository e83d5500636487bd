import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  compact,
  keptPrefixEnd,
  type Compactable,
  type CompactionResult,
  type CompactionSettings,
  type Summarizer,
} from '../../src/compaction/index.js';
import { itemsBytes, jsonBytes } from '../../src/compaction/size.js';
import { SummarizerError } from '../../src/compaction/summarizer-port.js';
import type { SizeTarget } from '../../src/compaction/size-target.js';
import { validateCompaction } from '../../src/compaction/validate.js';
import { validateConfig } from '../../src/config/load.js';
import type { ConfigInput } from '../../src/config/schema.js';
import { chat } from '../../src/dialects/chat.js';
import { messages as messagesDialect } from '../../src/dialects/messages.js';
import { responses } from '../../src/dialects/responses.js';
import type { Dialect } from '../../src/dialects/types.js';
import type { MemoryEntry } from '../../src/memory/store.js';
import { calls, deepFreeze, rCall, rOutput, rReasoning, rSay, rSystem, rUser, result, say, system, user } from './conversations.js';
import { chatAnswer, fakeSummarizer, hanging, noSummarizer, settingsOf, type FakeSummarizer } from './fake-summarizer.js';

/*
 * compact(request, settings, summarizer), with no network: the summarizer is a plain function
 * (fake-summarizer.ts). Where the summary goes in the list that is sent, for each dialect; then
 * edge tables with literal results: the record the header and the log are made of (strategy,
 * counts, sizes, summarizer calls and failure, memory), the summary the replay carries, and the
 * span the memory keeps, with the fallback, with a summarizer, and with a remembered summary.
 */

const config = validateConfig({ compaction: { strategy: 'fallback', keepRecent: 4, mask: false } });

const big = (chars: number, unit = 'x'): string => unit.repeat(chars);
const field = (dialect: Dialect) => (dialect === chat ? 'messages' : 'input');

async function compactTo(
  dialect: Dialect,
  items: unknown[],
  fitBytes: number,
): Promise<{ result: Extract<CompactionResult, { outcome: 'compacted' }>; sent: unknown[] }> {
  const request = deepFreeze({ model: 'm', [field(dialect)]: items });
  const bodyBytes = Buffer.byteLength(JSON.stringify(request));
  const target: SizeTarget = { fitBytes, aimBytes: fitBytes, bytesPerToken: 4, tokensBefore: Math.round(bodyBytes / 4), source: 'stated' };
  const result = await compact(
    { dialect, request, conversation: dialect.read(request)!, bodyBytes },
    settingsOf(config, target),
    noSummarizer(dialect.summarizer),
  );
  if (result.outcome !== 'compacted') throw new Error(`not compacted: ${result.why}`);
  const sent = JSON.parse(result.body.toString('utf8'))[field(dialect)] as unknown[];
  expect(validateCompaction(dialect, items, sent)).toEqual([]);
  return { result, sent };
}

const isSummary = (item: unknown): boolean => JSON.stringify(item).includes('[compaction-gateway] The ');

describe('rule: chronological order: head, opening task, summary, recent', () => {
  it('chat', async () => {
    const task = user('Fix the failing replay test', { name: 'alice' });
    const follow = user('also update the docs', { name: 'alice' });
    const messages = [
      system('rules'),
      { role: 'developer', content: 'more rules' },
      task,
      calls('a'),
      result('a', big(6000)),
      calls('b'),
      result('b', big(6000)),
      follow,
      calls('c'),
      result('c', big(6000)),
      say('Now the docs.'),
      calls('d'),
      result('d', 'done'),
    ];
    const { sent, result: r } = await compactTo(chat, messages, 12_000);
    expect(sent.slice(0, 3)).toEqual(messages.slice(0, 3));
    expect(isSummary(sent[3])).toBe(true);
    expect(sent[4]).toEqual(follow);
    expect(sent.slice(5)).toEqual(messages.slice(-3));
    expect(sent.filter(isSummary)).toHaveLength(1);
    expect(r.cut).toBe(0);
  });

  it('responses, with reasoning and parallel calls', async () => {
    const items = [
      rSystem('rules'),
      rUser('Fix the failing replay test'),
      rReasoning('1'),
      rCall('a'),
      rCall('b'),
      rOutput('a', big(6000)),
      rOutput('b', big(6000)),
      rUser('also update the docs'),
      rReasoning('2'),
      rSay('Now the docs.'),
      rReasoning('3'),
      rCall('c'),
      rOutput('c', 'done'),
    ];
    const { sent } = await compactTo(responses, items, 8_000);
    expect(sent.slice(0, 2)).toEqual(items.slice(0, 2));
    expect(isSummary(sent[2])).toBe(true);
    // keepRecent 4: the last unit (reasoning, call, output) and the pinned input; the reasoning
    // before "Now the docs." is condensed with that message.
    expect(sent.slice(3)).toEqual([items[7], ...items.slice(10)]);
  });
});

describe('rule: the count of cut contents (the header\u2019s cut=N) is what was shortened', () => {
  it.each([chat, responses])('$api', async (dialect) => {
    const items =
      dialect === chat
        ? [system('rules'), user('task'), say('ok'), calls('a', 'b'), result('a', big(30_000, 'a')), result('b', big(30_000, 'b'))]
        : [
            rSystem('rules'),
            rUser('task'),
            rSay('ok'),
            rCall('a'),
            rCall('b'),
            rOutput('a', big(30_000, 'a')),
            rOutput('b', big(30_000, 'b')),
          ];
    const { sent, result: r } = await compactTo(dialect, items, 20_000);
    const text = JSON.stringify(sent);
    const markers = text.match(/characters cut by compaction-gateway/g) ?? [];
    expect(r.cut).toBe(2);
    expect(markers).toHaveLength(2);
    // Oldest first: a goes to its floor, b loses only what is still needed.
    expect(text.match(/a{300}/g)!.join('').length).toBeLessThan(text.match(/b{300}/g)!.join('').length);
  });
});

describe('rule: a huge opening is condensed, not kept before the summary', () => {
  const opening = (chars: number) => [system('rules'), user(big(chars, 't')), say('ok')];

  it('keptPrefixEnd keeps an opening up to 32 KB and drops a larger one into the condensable part', () => {
    const exact = 32 * 1024 - itemsBytes([user('')]);
    const at = (chars: number) => keptPrefixEnd(chat.read({ messages: opening(chars) })!);
    expect(at(exact)).toBe(2);
    expect(at(exact + 1)).toBe(1);
    expect(at(100_000)).toBe(1);
  });

  it('compact() condenses it with the rest when a later input exists, and pins it when it is the last input', async () => {
    const task = user(big(40_000, 't'));
    const later = [system('rules'), task, calls('a'), result('a', big(6000)), user('and now?'), calls('b'), result('b', 'ok')];
    const condensed = await compactTo(chat, later, 10_000);
    expect(condensed.sent[0]).toEqual(later[0]);
    expect(isSummary(condensed.sent[1])).toBe(true);
    expect(condensed.sent).not.toContainEqual(task);

    const only = [system('rules'), task, calls('a'), result('a', big(60_000)), calls('b'), result('b', 'ok')];
    const pinned = await compactTo(chat, only, 50_000);
    expect(isSummary(pinned.sent[1])).toBe(true);
    expect(pinned.sent[2]).toEqual(task);
  });
});

// system, task, two tool rounds of 3,000 bytes, a follow-up, a last tool round: 6,750 bytes.
const items = deepFreeze([
  system('rules'),
  user('Fix the failing test'),
  calls('a'),
  result('a', 'A'.repeat(3000)),
  calls('b'),
  result('b', 'B'.repeat(3000)),
  user('and the docs'),
  calls('c'),
  result('c', 'done'),
]);
const request = deepFreeze({ model: 'm', messages: items });
const BODY = 6_750;
const target = (fitBytes: number, aimBytes = fitBytes): SizeTarget => ({
  fitBytes,
  aimBytes,
  bytesPerToken: 4,
  tokensBefore: 1_000,
  source: 'stated',
});

/** The summarizer a test scripts; none (a call is an error) when it scripts none. */
let summarizer: FakeSummarizer | undefined;
afterEach(() => {
  summarizer = undefined;
});

function input(
  o: {
    config?: ConfigInput;
    target?: SizeTarget;
    recalled?: MemoryEntry;
    dialect?: Dialect;
    request?: Record<string, unknown>;
    events?: unknown[];
  } = {},
): [Compactable, CompactionSettings, Summarizer] {
  const req = o.request ?? request;
  const dialect = o.dialect ?? chat;
  // The summary rung: masking (compaction.mask) is tested in mask.test.ts.
  const config = validateConfig({ ...o.config, compaction: { strategy: 'fallback', keepRecent: 2, mask: false, ...o.config?.compaction } });
  const onSummary = o.events ? (event: unknown) => void o.events!.push(event) : undefined;
  return [
    { dialect, request: req, conversation: dialect.read(req)!, bodyBytes: Buffer.byteLength(JSON.stringify(req)), recalled: o.recalled },
    settingsOf(config, o.target ?? target(5_000), 'a test', onSummary),
    summarizer ?? noSummarizer(dialect.summarizer),
  ];
}

const sent = (r: CompactionResult): any[] => (r.outcome === 'compacted' ? JSON.parse(r.body.toString()).messages : []);
const INTRO = '[compaction-gateway] The 4 earlier messages of this conversation were condensed by the gateway because a test. Summary:\n\n';
const DIGEST =
  '4 messages (about 1,599 tokens) were condensed without a model summary; what follows is a mechanical digest.\nTool calls: 2 (read_file 2).';
// Every summary ends with the trail of the condensed items: here the two files read.
const TRAIL = '\n\n[trail of the condensed messages, read off them by the gateway]\nfiles read: src/a.ts, src/b.ts';
const READ_AB = { changed: [], read: ['src/a.ts', 'src/b.ts'], commands: [], errors: [], said: [] };

describe('with the fallback summary', () => {
  it('the record, the request sent, and the span remembered', async () => {
    const r = await compact(...input());
    const summary = { role: 'user', content: INTRO + DIGEST + TRAIL };
    expect(r).toEqual({
      messagesBefore: 9,
      bytesBefore: BODY,
      tokensBefore: 1_000,
      outcome: 'compacted',
      body: expect.any(Buffer),
      strategy: 'fallback',
      messagesAfter: 6,
      bytesAfter: 743,
      tokensAfter: 186,
      summarizerMs: undefined,
      summarizerCalls: 0,
      summarizerTokens: undefined,
      summarizerFailure: undefined,
      providerFailure: undefined,
      memory: 'miss',
      cut: 0,
      // Chat completions carry no bound state: nothing to strip, no header to add.
      headers: {},
      bound: null,
      restrip: expect.any(Function),
      newSpan: {
        fixedEnd: 2,
        spanLength: 5,
        pinnedOffsets: [4],
        summary: [summary],
        // The summary's own text; the trail is kept apart, for the next summary to carry forward.
        summaryText: DIGEST,
        trail: READ_AB,
        summarizedCount: 4,
        strategy: 'fallback',
        summarizerCalls: 0,
        // A new summary: whatever the request carries was made before it.
        bound: { freshFrom: 9, stripAll: false },
      },
      // The span in force: this new one.
      span: expect.any(Object),
    });
    expect((r as { span: unknown }).span).toBe((r as { newSpan: unknown }).newSpan);
    expect((r as { restrip: () => unknown }).restrip()).toBeNull();
    expect(r.outcome === 'compacted' && r.body.length).toBe(743);
    expect(sent(r)).toEqual([items[0], items[1], summary, items[6], items[7], items[8]]);
    expect(JSON.parse((r as { body: Buffer }).body.toString()).model).toBe('m');
  });

  it('the summary in the configured role (chat has a system role to give it)', async () => {
    const r = await compact(...input({ config: { compaction: { strategy: 'fallback', keepRecent: 2, summaryRole: 'system' } } }));
    expect(sent(r)[2]).toEqual({ role: 'system', content: INTRO + DIGEST + TRAIL });
  });

  it('tokens after in the target\u2019s bytes per token', async () => {
    const r = await compact(...input({ target: { ...target(5_000), bytesPerToken: 2 } }));
    expect(r).toMatchObject({ bytesAfter: 743, tokensAfter: 372 });
  });
});

describe('the room the summary has', () => {
  // 100 user requests between short assistant turns, then a tool round: the trail lists the
  // newest of requests 000..098 that fit its room (request 099, the last input, is pinned after
  // it). The budget is the reserve less the 153-byte introduction item; the trail may take 50% of
  // it, and the digest (126 bytes, no tool calls) has the rest but needs no more. So the item is
  // 153 + 126 + 4 ("\n\n") + the trail: for the first row, a 1,400-byte reserve leaves 1,247, the
  // trail's room is 623, and the newest 31 requests (17 bytes each) take 615 of it: 898 bytes in all.
  const many: unknown[] = [system('rules'), user('Fix the failing test')];
  for (let i = 0; i < 100; i++) many.push(say(`step ${i}`), user(`request ${String(i).padStart(3, '0')}`));
  many.push(calls('z'), result('z', 'done'));
  const req = deepFreeze({ model: 'm', messages: many });

  it.each([
    // reserve 1,400: trail room 623
    ['the configured summary size in bytes, plus 1,000', 100, 100_000, 898, 68],
    // reserve 993 (a quarter of 3,974): trail room 420
    ['a quarter of what fits, when that is less', 2_000, 4_000, 694, 80],
    // reserve 643 (a quarter of 2,574): trail room 245
    ['a quarter of what fits, under the configured size', 100, 2_600, 524, 90],
    // reserve 600 (a quarter of 1,974 is 493): trail room 223
    ['600 bytes at least', 100, 2_000, 490, 92],
  ])('%s', async (_name, maxSummaryTokens, fit, bytes, earlier) => {
    const r = await compact(
      ...input({
        request: req,
        config: { compaction: { strategy: 'fallback', keepRecent: 2 }, summarizer: { maxSummaryTokens } },
        target: target(fit),
      }),
    );
    const summary = sent(r)[2];
    expect(jsonBytes(summary)).toBe(bytes);
    // Requests count from 000, so with `earlier` of them left out the first one shown is request `earlier`.
    const listed = Array.from({ length: 99 - earlier }, (_, i) => JSON.stringify(`request ${String(earlier + i).padStart(3, '0')}`));
    expect(summary.content.endsWith(`\nuser said: (${earlier} earlier); ${listed.join('; ')}`)).toBe(true);
    expect(sent(r).slice(3)).toEqual(many.slice(-3));
  });
});

describe('why nothing was sent compacted', () => {
  it('nothing_to_shrink: everything is recent, and it fits', async () => {
    const r = await compact(...input({ config: { compaction: { strategy: 'fallback', keepRecent: 100 } }, target: target(100_000) }));
    expect(r).toEqual({
      messagesBefore: 9,
      bytesBefore: BODY,
      tokensBefore: 1_000,
      outcome: 'not_shrunk',
      why: 'nothing_to_shrink',
      summarizerCalls: 0,
    });
  });

  it('cannot_fit: the kept items alone are over what fits', async () => {
    const r = await compact(...input({ target: target(300) }));
    expect(r).toEqual({
      messagesBefore: 9,
      bytesBefore: BODY,
      tokensBefore: 1_000,
      outcome: 'not_shrunk',
      why: 'cannot_fit',
      summarizerCalls: 0,
    });
  });
});

describe('with a summarizer', () => {
  it('asks it once for the condensed items, within the summary\u2019s share of the target, and says so', async () => {
    summarizer = fakeSummarizer(chat.summarizer, () => chatAnswer('SUMMARY'));
    const events: any[] = [];
    const before = performance.now();
    const r = await compact(
      ...input({
        config: { compaction: { strategy: 'summarize', keepRecent: 2 }, summarizer: { maxSummaryTokens: 100_000 } },
        target: target(20_000, 4_000),
        events,
      }),
    );
    const elapsed = performance.now() - before;
    expect(r).toMatchObject({
      outcome: 'compacted',
      strategy: 'summarize',
      summarizerCalls: 1,
      summarizerFailure: undefined,
      memory: 'miss',
      cut: 0,
    });
    expect(sent(r)[2]).toEqual({ role: 'user', content: `${INTRO}SUMMARY${TRAIL}` });
    // The summarizer's time, as the header reports it, lies within the call.
    const ms = (r as { summarizerMs: number }).summarizerMs;
    expect(ms).toBeGreaterThanOrEqual(0);
    expect(ms).toBeLessThanOrEqual(elapsed);
    expect((r as { newSpan: { summaryText: string; strategy: string; summarizerCalls: number } }).newSpan).toMatchObject({
      summaryText: 'SUMMARY',
      trail: READ_AB,
      strategy: 'summarize',
      summarizerCalls: 1,
    });
    expect(events).toEqual([
      { phase: 'start', items: 4 },
      { phase: 'end', ms, calls: 1 },
    ]);
    // The summary may take a quarter of what fits (less the 25 bytes of the request around the
    // messages, less one): 4,993 bytes; less the 151 of the item holding the introduction, 4,842;
    // less the trail's 99 bytes (with the blank line before it), 4,743, at 4 bytes a token.
    const [call] = summarizer.calls;
    expect(call.json.max_tokens).toBe(1_185);
    expect(call.json.messages[1].content).toContain('[tool result a]\n  AAAA');
  });

  it('asks for at most the configured summary size, and has at least 600 bytes for the summary item', async () => {
    summarizer = fakeSummarizer(chat.summarizer, () => chatAnswer('SUMMARY'));
    await compact(
      ...input({
        config: { compaction: { strategy: 'summarize', keepRecent: 2 }, summarizer: { maxSummaryTokens: 100 } },
        target: target(20_000, 4_000),
      }),
    );
    expect(summarizer.calls[0].json.max_tokens).toBe(100);
    await compact(...input({ config: { compaction: { strategy: 'summarize', keepRecent: 2 } }, target: target(2_000, 1_000) }));
    // A quarter of 1,974 bytes is less than 600: 600 less the 151-byte introduction item is 449,
    // less the trail's 99 bytes, 350 bytes.
    expect(summarizer.calls[1].json.max_tokens).toBe(87);
  });

  it('falls back to the digest when it fails, and names the failure', async () => {
    summarizer = fakeSummarizer(chat.summarizer, () => ({ status: 503, json: { error: 'overloaded' } }));
    const events: any[] = [];
    const before = performance.now();
    const r = await compact(...input({ config: { compaction: { strategy: 'summarize', keepRecent: 2 } }, events }));
    const elapsed = performance.now() - before;
    expect(r).toMatchObject({ outcome: 'compacted', strategy: 'fallback', summarizerCalls: 1, summarizerFailure: 'rejected', cut: 0 });
    const ms = (r as { summarizerMs: number }).summarizerMs;
    expect(ms).toBeGreaterThanOrEqual(0);
    expect(ms).toBeLessThanOrEqual(elapsed);
    expect(sent(r)[2]).toEqual({ role: 'user', content: INTRO + DIGEST + TRAIL });
    expect(events).toEqual([
      { phase: 'start', items: 4 },
      { phase: 'end', ms, calls: 1, failure: 'rejected' },
    ]);
  });

  it('falls back the same with nobody listening for summary events', async () => {
    summarizer = fakeSummarizer(chat.summarizer, () => ({ status: 503, json: { error: 'overloaded' } }));
    const r = await compact(...input({ config: { compaction: { strategy: 'summarize', keepRecent: 2 } } }));
    expect(r).toMatchObject({ outcome: 'compacted', strategy: 'fallback', summarizerCalls: 1, summarizerFailure: 'rejected' });
    expect(sent(r)[2]).toEqual({ role: 'user', content: INTRO + DIGEST + TRAIL });
  });

  it('the deadline the caller hands over ends a summary that does not answer: the digest, named `timeout`', async () => {
    const hangs = fakeSummarizer(chat.summarizer, hanging);
    summarizer = hangs;
    const events: any[] = [];
    const [subject, settings, s] = input({ config: { compaction: { strategy: 'summarize', keepRecent: 2 } }, events });
    const deadline = new AbortController();
    const pending = compact(subject, { ...settings, deadline: deadline.signal }, s);
    await vi.waitFor(() => expect(hangs.calls).toHaveLength(1));
    expect(hangs.calls[0].signal.aborted).toBe(false);
    deadline.abort(new DOMException('the summarizer did not answer in time', 'TimeoutError'));
    const r = await pending;
    expect(r).toMatchObject({ outcome: 'compacted', strategy: 'fallback', summarizerCalls: 1, summarizerFailure: 'timeout' });
    expect(sent(r)[2]).toEqual({ role: 'user', content: INTRO + DIGEST + TRAIL });
    expect(hangs.calls[0].signal.aborted).toBe(true);
    expect(events.at(-1)).toMatchObject({ phase: 'end', calls: 1, failure: 'timeout' });
  });

  it('a client gone away ends the compaction: nothing is sent', async () => {
    // (The rescue's summarizer says `aborted` once the client has left: test/rescue/summarizer-client.test.ts.)
    summarizer = fakeSummarizer(chat.summarizer, () => {
      throw new SummarizerError('aborted', 'the client went away', 0);
    });
    const err = await compact(...input({ config: { compaction: { strategy: 'summarize', keepRecent: 2 } } })).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(SummarizerError);
    expect((err as SummarizerError).kind).toBe('aborted');
  });

  it('never reads encrypted reasoning: it is dropped with its turn, not shown to the summarizer', async () => {
    summarizer = fakeSummarizer(responses.summarizer, () => ({
      json: { output: [{ type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'SUMMARY' }] }] },
    }));
    const list = [
      rSystem('rules'),
      rUser('task'),
      rReasoning('1'),
      rCall('a'),
      rOutput('a', 'A'.repeat(3000)),
      rReasoning('2'),
      rCall('b'),
      rOutput('b', 'done'),
    ];
    const req = { model: 'm', input: list };
    const events: any[] = [];
    const r = await compact(
      ...input({
        dialect: responses,
        request: req,
        config: { compaction: { strategy: 'summarize', keepRecent: 2 } },
        target: target(3_000),
        events,
      }),
    );
    expect(r).toMatchObject({ outcome: 'compacted', strategy: 'summarize', messagesAfter: 6 });
    expect(events[0]).toEqual({ phase: 'start', items: 2 });
    expect(JSON.stringify(summarizer.calls[0].json)).not.toContain('gAAAAB');
    expect(JSON.parse((r as { body: Buffer }).body.toString()).input.slice(3)).toEqual(list.slice(5));
  });
});

describe('a cut with nothing to summarise', () => {
  it('is reported with the configured strategy and no summarizer call', async () => {
    const req = deepFreeze({ model: 'm', messages: [system('rules'), user('task'), calls('g'), result('g', 'G'.repeat(20_000))] });
    const r = await compact(
      ...input({ request: req, config: { compaction: { strategy: 'summarize', keepRecent: 2 } }, target: target(4_000) }),
    );
    expect(r).toMatchObject({
      outcome: 'compacted',
      strategy: 'summarize',
      summarizerCalls: 0,
      summarizerMs: undefined,
      cut: 1,
      messagesAfter: 4,
      newSpan: undefined,
    });
    expect(sent(r).slice(0, 3)).toEqual(req.messages.slice(0, 3));
  });
});

describe('what is known to fit is never reached', () => {
  // Six tool rounds; the summarizer's answer is long enough to fill the summary's whole room
  // (1,400 bytes), so the request sent is exactly the size the plan counted.
  const rounds = deepFreeze([
    system('rules'),
    user('task'),
    ...Array.from({ length: 6 }, (_, i) => [calls(`c${i}`), result(`c${i}`, 'r'.repeat(3_000))]).flat(),
  ]);
  const req = deepFreeze({ model: 'm', messages: rounds });
  const overhead = Buffer.byteLength(JSON.stringify(req)) - itemsBytes(rounds);
  const config: ConfigInput = { compaction: { strategy: 'summarize', keepRecent: 100 }, summarizer: { maxSummaryTokens: 100 } };
  const sizeFrom = (start: number) =>
    overhead +
    itemsBytes([
      rounds[0],
      rounds[1],
      { role: 'user', content: 'x'.repeat(1_400 - jsonBytes({ role: 'user', content: '' })) },
      ...rounds.slice(start),
    ]);

  it('a tail that would make the request exactly that size is condensed too', async () => {
    summarizer = fakeSummarizer(chat.summarizer, () => chatAnswer('S'.repeat(5_000)));
    const under = await compact(...input({ request: req, config, target: target(sizeFrom(4) + 1, 1e9) }));
    expect(under).toMatchObject({ outcome: 'compacted', bytesAfter: sizeFrom(4), messagesAfter: 13 });
    const at = await compact(...input({ request: req, config, target: target(sizeFrom(4), 1e9) }));
    expect(at).toMatchObject({ outcome: 'compacted', bytesAfter: sizeFrom(6), messagesAfter: 11 });
  });

  it('the aim is a size of the whole body too: a tail landing exactly on it is kept', async () => {
    summarizer = fakeSummarizer(chat.summarizer, () => chatAnswer('S'.repeat(5_000)));
    expect(await compact(...input({ request: req, config, target: target(100_000, sizeFrom(4)) }))).toMatchObject({
      outcome: 'compacted',
      bytesAfter: sizeFrom(4),
    });
    expect(await compact(...input({ request: req, config, target: target(100_000, sizeFrom(4) - 1) }))).toMatchObject({
      outcome: 'compacted',
      bytesAfter: sizeFrom(6),
    });
  });
});

describe('a written request larger than planned (the Messages API merges adjacent turns)', () => {
  // Two plain-string user messages in a row are sent as one with two text blocks: 19 bytes more
  // than the plan counted for them and the summary merged into the task. The summarizer's answer
  // fills the summary's 600 bytes, so the exact size sent is known.
  const convo = deepFreeze([
    { role: 'user', content: 'task' },
    { role: 'assistant', content: 'a'.repeat(3_000) },
    { role: 'user', content: 'm'.repeat(3_000) },
    { role: 'assistant', content: 'ok' },
    { role: 'user', content: 'p' },
    { role: 'user', content: 'q' },
  ]);
  const req = deepFreeze({ model: 'm', max_tokens: 100, messages: convo });
  const emptySummary = jsonBytes(messagesDialect.summaryItem('', 'user'));
  const sentBytes = messagesDialect.write(req, [
    convo[0],
    messagesDialect.summaryItem('x'.repeat(600 - emptySummary), 'user'),
    ...convo.slice(3),
  ]).length;
  const config: ConfigInput = { compaction: { strategy: 'summarize', keepRecent: 100 } };

  it('is not sent when it comes out at the size known to fit; one byte more room and it is', async () => {
    summarizer = fakeSummarizer(messagesDialect.summarizer, () => ({ json: { content: [{ type: 'text', text: 'S'.repeat(5_000) }] } }));
    expect(
      sentBytes -
        Buffer.byteLength(
          JSON.stringify({
            ...req,
            messages: [convo[0], messagesDialect.summaryItem('x'.repeat(600 - emptySummary), 'user'), ...convo.slice(3)],
          }),
        ),
    ).toBe(19);
    const at = await compact(...input({ dialect: messagesDialect, request: req, config, target: target(sentBytes, 1e9) }));
    expect(at).toEqual({
      messagesBefore: 6,
      bytesBefore: Buffer.byteLength(JSON.stringify(req)),
      tokensBefore: 1_000,
      outcome: 'not_shrunk',
      why: 'cannot_fit',
      summarizerCalls: 0,
    });
    const under = await compact(...input({ dialect: messagesDialect, request: req, config, target: target(sentBytes + 1, 1e9) }));
    expect(under).toMatchObject({ outcome: 'compacted', bytesAfter: sentBytes, strategy: 'summarize' });
  });
});

describe('with a remembered summary', () => {
  // The span of items 2..6 (the first two tool rounds, and the follow-up pinned) summarised before.
  const old = { role: 'user', content: '[compaction-gateway] The 4 earlier messages … Summary:\n\nOLD SUMMARY' };
  const entry: MemoryEntry = {
    spanLength: 5,
    spanDigest: 'd',
    pinnedOffsets: [4],
    summary: old,
    summaryText: 'OLD SUMMARY',
    summarizedCount: 4,
    strategy: 'summarize',
    summarizerCalls: 3,
    fitBytes: 5_000,
    aimBytes: 5_000,
    createdAt: 0,
  };

  it('reused as it is while the request fits with it: the same prefix, no summarizer call', async () => {
    const r = await compact(...input({ recalled: entry }));
    expect(r).toMatchObject({
      outcome: 'compacted',
      strategy: 'summarize',
      summarizerCalls: 0,
      memory: 'hit',
      cut: 0,
      messagesAfter: 6,
      newSpan: undefined,
    });
    expect(sent(r)).toEqual([items[0], items[1], old, items[6], items[7], items[8]]);
    const bytes = (r as { bytesAfter: number }).bytesAfter;
    // Reused only while smaller than what fits: at exactly that size it is planned again (and
    // here nothing is left to condense beside it).
    expect(await compact(...input({ recalled: entry, target: target(bytes + 1) }))).toMatchObject({
      outcome: 'compacted',
      memory: 'hit',
      bytesAfter: bytes,
      newSpan: undefined,
    });
    expect(await compact(...input({ recalled: entry, target: target(bytes) }))).toMatchObject({
      outcome: 'not_shrunk',
      why: 'nothing_to_shrink',
    });
  });

  it('kept with its pinned input when only the newest turn is over: that turn is cut, nothing new summarised', async () => {
    const big = result('g', 'G'.repeat(20_000));
    const req = deepFreeze({ model: 'm', messages: [...items.slice(0, 7), calls('g'), big] });
    const r = await compact(...input({ request: req, recalled: entry, target: target(4_000) }));
    expect(r).toMatchObject({
      outcome: 'compacted',
      strategy: 'summarize',
      summarizerCalls: 0,
      memory: 'hit',
      cut: 1,
      messagesAfter: 6,
      newSpan: undefined,
    });
    const out = sent(r);
    expect(out.slice(0, 5)).toEqual([items[0], items[1], old, items[6], req.messages[7]]);
    expect(out[5].content).toMatch(/^G{300,}\n\[\.\.\. [\d,]+ characters cut by compaction-gateway \.\.\.\]\nG{300,}$/);
  });

  it('extended when the turns since do not fit beside it: the old summary and the new items, condensed together', async () => {
    const longer = deepFreeze([
      ...items,
      calls('d'),
      result('d', 'D'.repeat(3000)),
      calls('e'),
      result('e', 'E'.repeat(3000)),
      calls('f'),
      result('f', 'ok'),
    ]);
    const req = { model: 'm', messages: longer };
    const r = await compact(...input({ request: req, recalled: entry, target: target(4_000) }));
    const text = `OLD SUMMARY\n\n6 messages (about 1,650 tokens) were condensed without a model summary; what follows is a mechanical digest.\nTool calls: 3 (read_file 3).`;
    // The remembered entry has no trail (made before trails were kept): only the new items' own.
    const trail = '\n\n[trail of the condensed messages, read off them by the gateway]\nfiles read: src/c.ts, src/d.ts, src/e.ts';
    const summary = {
      role: 'user',
      content: `[compaction-gateway] The 10 earlier messages of this conversation were condensed by the gateway because a test. Summary:\n\n${text}${trail}`,
    };
    expect(r).toMatchObject({ outcome: 'compacted', strategy: 'fallback', summarizerCalls: 0, memory: 'hit', messagesAfter: 6 });
    expect(sent(r)).toEqual([longer[0], longer[1], summary, longer[6], longer[13], longer[14]]);
    expect((r as { newSpan: unknown }).newSpan).toEqual({
      fixedEnd: 2,
      spanLength: 11,
      pinnedOffsets: [4],
      summary: [summary],
      summaryText: text,
      trail: { changed: [], read: ['src/c.ts', 'src/d.ts', 'src/e.ts'], commands: [], errors: [], said: [] },
      summarizedCount: 10,
      strategy: 'fallback',
      summarizerCalls: 3,
      bound: { freshFrom: 15, stripAll: false },
    });
  });
});
