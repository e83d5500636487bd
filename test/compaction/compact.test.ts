import { Agent } from 'undici';
import { afterAll, describe, expect, it } from 'vitest';
import { compact, keptPrefixEnd, type CompactionResult } from '../../src/compaction/index.js';
import { itemsBytes } from '../../src/compaction/size.js';
import type { SizeTarget } from '../../src/compaction/target.js';
import { validateCompaction } from '../../src/compaction/validate.js';
import { validateConfig } from '../../src/config/load.js';
import { chat } from '../../src/dialects/chat.js';
import { responses } from '../../src/dialects/responses.js';
import type { Dialect } from '../../src/dialects/types.js';
import { calls, deepFreeze, rCall, rOutput, rReasoning, rSay, rSystem, rUser, result, say, system, user } from './conversations.js';

/*
 * compact() end to end with the deterministic fallback (no network): where the summary goes in
 * the list that is sent, for each dialect.
 */

const config = validateConfig({ compaction: { strategy: 'fallback', keepRecent: 4, mask: false } });
const dispatcher = new Agent();
afterAll(() => dispatcher.close());

const big = (chars: number, unit = 'x'): string => unit.repeat(chars);
const field = (dialect: Dialect) => (dialect === chat ? 'messages' : 'input');

async function compactTo(dialect: Dialect, items: unknown[], fitBytes: number): Promise<{ result: Extract<CompactionResult, { outcome: 'compacted' }>; sent: unknown[] }> {
  const request = deepFreeze({ model: 'm', [field(dialect)]: items });
  const bodyBytes = Buffer.byteLength(JSON.stringify(request));
  const target: SizeTarget = { fitBytes, aimBytes: fitBytes, bytesPerToken: 4, tokensBefore: Math.round(bodyBytes / 4), source: 'stated' };
  const result = await compact({
    dialect,
    request,
    conversation: dialect.read(request)!,
    bodyBytes,
    target,
    config,
    dispatcher,
    summarizer: { url: 'http://127.0.0.1:9/v1', model: 'm', headers: {}, wire: dialect.summarizer },
    signal: new AbortController().signal,
    because: 'a test',
  });
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
        : [rSystem('rules'), rUser('task'), rSay('ok'), rCall('a'), rCall('b'), rOutput('a', big(30_000, 'a')), rOutput('b', big(30_000, 'b'))];
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
