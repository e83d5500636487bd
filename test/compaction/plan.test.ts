import { describe, expect, it } from 'vitest';
import { assemble, planCompaction } from '../../src/compaction/plan.js';
import { jsonBytes } from '../../src/compaction/size.js';
import type { ChatMessage, Plan, PlanFailure, PlanInput } from '../../src/compaction/types.js';
import { validateCompaction } from '../../src/compaction/validate.js';
import { calls, deepFreeze, imagePart, result, say, system, user } from './conversations.js';

const big = (chars: number, unit = 'x'): string => unit.repeat(Math.ceil(chars / unit.length)).slice(0, chars);

function plan(messages: ChatMessage[], options: Partial<PlanInput> = {}): Plan {
  const outcome = planCompaction({ messages, keepRecent: 4, targetBytes: 1e9, summaryReserveBytes: 100, ...options });
  if ('failure' in outcome) throw new Error(`expected a plan, got ${outcome.failure}`);
  return outcome;
}

function failure(messages: ChatMessage[], options: Partial<PlanInput>): PlanFailure['failure'] | 'plan' {
  const outcome = planCompaction({ messages, keepRecent: 4, targetBytes: 1e9, summaryReserveBytes: 100, ...options });
  return 'failure' in outcome ? outcome.failure : 'plan';
}

/** A summary message of exactly `bytes` JSON bytes, to check the plan's arithmetic. */
function summaryOf(bytes: number): ChatMessage {
  const empty = { role: 'user', content: '' };
  return { role: 'user', content: 's'.repeat(bytes - jsonBytes(empty)) };
}

describe('head', () => {
  it('is the leading system and developer messages, as the same objects in order', () => {
    const messages = [system('a'), { role: 'developer', content: 'b' }, system('c'), user('task'), say('x'), say('y'), say('z'), say('w'), say('v')];
    const p = plan(messages, { keepRecent: 2 });
    expect(p.head).toHaveLength(3);
    p.head.forEach((m, i) => expect(m).toBe(messages[i]));
  });

  it('stops at the first other message; later system messages are ordinary', () => {
    const messages = [system('a'), user('task'), system(big(500)), say('x'), say('y'), say('z')];
    const p = plan(messages, { keepRecent: 2 });
    expect(p.head).toEqual([messages[0]]);
    expect(p.middle).toContain(messages[2]);
  });
});

describe('tail boundary', () => {
  const messages = [system('s'), user('task'), say(big(500)), calls('c1', 'c2'), result('c1'), result('c2'), say('done'), user('next')];

  it('moves earlier when it would start at a tool result, keeping the calling assistant message', () => {
    const p = plan(messages, { keepRecent: 3 }); // would start at result('c2')
    expect(p.tail.map((m) => m.role)).toEqual(['assistant', 'tool', 'tool', 'assistant', 'user']);
    expect(p.tail[0]).toBe(messages[3]);
    expect(p.middle).toEqual([messages[1], messages[2]]);
  });

  it('is exactly keepRecent when that starts at a non-tool message', () => {
    const p = plan(messages, { keepRecent: 2 });
    expect(p.tail).toEqual([messages[6], messages[7]]);
  });

  it('takes everything after the head when keepRecent is larger than the conversation', () => {
    const withBigOutput = [system('s'), user('task'), calls('c1'), result('c1', big(50_000))];
    const p = plan(withBigOutput, { keepRecent: 100, targetBytes: 20_000 });
    expect(p.middle).toEqual([]);
    expect(p.tail).toHaveLength(3);
  });
});

describe('pinned last user message', () => {
  it('is taken out of the middle, kept verbatim, and placed after the summary', () => {
    const task = user([{ type: 'text', text: 'Fix the bug' }, imagePart(3000)], { name: 'alice' });
    const messages = [system('s'), task, calls('a'), result('a'), calls('b'), result('b'), calls('c'), result('c')];
    const p = plan(messages, { keepRecent: 2 });
    expect(p.pinned).toHaveLength(1);
    expect(p.pinned[0]).toBe(task);
    expect(p.middle).not.toContain(task);
    expect(p.middle).toEqual(messages.slice(2, 6));
    const compacted = assemble(p, summaryOf(100));
    expect(compacted.indexOf(task)).toBe(2);
    expect(validateCompaction(messages, compacted)).toEqual([]);
  });

  it('is not pinned when it is already in the tail', () => {
    const messages = [system('s'), user('old'), say('a'), say('b'), user('new'), say('c')];
    const p = plan(messages, { keepRecent: 2 });
    expect(p.pinned).toEqual([]);
    expect(p.tail).toEqual([messages[4], messages[5]]);
  });

  it('is pinned when keepRecent is 0, leaving an empty tail', () => {
    const messages = [system('s'), user('task'), calls('a'), result('a')];
    const p = plan(messages, { keepRecent: 0 });
    expect(p.tail).toEqual([]);
    expect(p.pinned).toEqual([messages[1]]);
  });
});

describe('kept messages', () => {
  it('keep parts arrays, null content with tool_calls, names and unknown fields, by reference', () => {
    const asking = { ...calls('k1'), reasoning_content: 'thinking', x_vendor: { a: 1 } };
    const answer = { ...result('k1', [{ type: 'text', text: 'file body' }]), name: 'read_file', x_latency_ms: 12 };
    const question = user([{ type: 'text', text: 'and now?' }], { name: 'bob', x_client: true });
    const messages = [system('s'), user('task'), say(big(5000)), asking, answer, question];
    const p = plan(messages, { keepRecent: 3 });
    expect(p.tail[0]).toBe(asking);
    expect(p.tail[1]).toBe(answer);
    expect(p.tail[2]).toBe(question);
    expect(assemble(p, null)).toEqual([messages[0], asking, answer, question]);
  });
});

describe('shrinking the tail', () => {
  it('replaces images in tail messages, but not in the last user message', () => {
    const shot = { ...result('c1', [{ type: 'text', text: 'screenshot:' }, imagePart(200_000)]), name: 'screenshot' };
    const last = user([{ type: 'text', text: 'what do you see?' }, imagePart(50_000)]);
    const messages = [system('s'), user('task'), say(big(2000)), calls('c1'), shot, last];
    const p = plan(messages, { keepRecent: 3, targetBytes: 100_000 });
    expect(p.replacedImages).toBe(1);
    expect(p.shrunkContents).toBe(0);
    expect(p.tail[1]).not.toBe(shot);
    expect(p.tail[1]).toEqual({ ...shot, content: [{ type: 'text', text: 'screenshot:' }, { type: 'text', text: '[image omitted by compaction-gateway: 200.1 KB]' }] });
    expect(p.tail[2]).toBe(last);
    expect(jsonBytes(assemble(p, summaryOf(100)))).toBeLessThanOrEqual(100_000);
  });

  it('replaces the other inline image shapes too', () => {
    const anthropic = { type: 'image', source: { type: 'base64', media_type: 'image/png', data: big(30_000, 'Q') } };
    const responses = { type: 'input_image', image_url: `data:image/jpeg;base64,${big(30_000, 'Q')}` };
    const messages = [system('s'), user('task'), say('a'), say('b'), { role: 'assistant', content: [anthropic, responses] }];
    const p = plan(messages, { keepRecent: 1, targetBytes: 5_000 });
    expect(p.replacedImages).toBe(2);
    expect(JSON.stringify(p.tail)).not.toContain('QQQQ');
  });

  it('cuts one 5 MB tool output in the tail so that the result fits', () => {
    const output = `BEGIN ${big(5_000_000, 'log line\n')}END`;
    const messages = [system('s'), user('task'), calls('c0'), result('c0'), calls('c1'), result('c1', output), say('ok')];
    const p = plan(messages, { keepRecent: 3, targetBytes: 200_000, summaryReserveBytes: 4000 });
    expect(p.shrunkContents).toBe(1);
    const cut = p.tail[1].content as string;
    expect(cut.startsWith(output.slice(0, 1000))).toBe(true);
    expect(cut.endsWith(output.slice(-1000))).toBe(true);
    expect(cut).toMatch(/\n\[\.\.\. [\d,]+ characters cut by compaction-gateway \.\.\.\]\n/);
    const compacted = assemble(p, summaryOf(4000));
    expect(jsonBytes(compacted)).toBeLessThanOrEqual(200_000);
    expect(jsonBytes(compacted)).toBeGreaterThan(190_000); // cut only as much as needed
    expect(validateCompaction(messages, compacted)).toEqual([]);
  });

  it('cuts tool outputs before other texts, and never the last user message', () => {
    const messages = [system('s'), user('old'), say('a'), say(big(30_000, 'a')), calls('c'), result('c', big(30_000, 't')), user(big(30_000, 'u'))];
    const p = plan(messages, { keepRecent: 4, targetBytes: 80_000 });
    expect(p.shrunkContents).toBe(1);
    expect(p.tail[0]).toBe(messages[3]);
    expect((p.tail[2].content as string).length).toBeLessThan(30_000);
    expect(p.tail[3]).toBe(messages[6]);
  });

  it('cuts a text part inside a parts array', () => {
    const messages = [system('s'), user('task'), calls('c'), result('c', [{ type: 'text', text: big(40_000), extra: 1 }])];
    const p = plan(messages, { keepRecent: 10, targetBytes: 10_000, summaryReserveBytes: 1e9 });
    const part = (p.tail[2].content as Record<string, unknown>[])[0];
    expect(part.extra).toBe(1);
    expect((part.text as string).length).toBeLessThan(10_000);
  });

  it('counts the summary reserve only when there is a middle to summarise', () => {
    const messages = [system('s'), user('task'), calls('c'), result('c', big(100_000))];
    const p = plan(messages, { keepRecent: 10, targetBytes: 50_000, summaryReserveBytes: 1e9 });
    expect(p.middle).toEqual([]);
    expect(jsonBytes(assemble(p, null))).toBeLessThanOrEqual(50_000);
  });
});

describe('failures', () => {
  it('cannot_fit when the last user message alone is over the target', () => {
    const messages = [system('s'), user('task'), say(big(10_000)), calls('c'), result('c'), user(big(60_000))];
    expect(failure(messages, { keepRecent: 1, targetBytes: 50_000 })).toBe('cannot_fit');
  });

  it('cannot_fit when the head alone is over the target', () => {
    const messages = [system(big(60_000)), user('task'), say(big(10_000)), say('b'), say('c')];
    expect(failure(messages, { keepRecent: 1, targetBytes: 50_000 })).toBe('cannot_fit');
  });

  it('nothing_to_shrink for a system prompt and one user message that are too big', () => {
    expect(failure([system('s'), user(big(60_000))], { targetBytes: 50_000 })).toBe('nothing_to_shrink');
  });

  it('nothing_to_shrink when nothing is in the middle and the messages already fit', () => {
    expect(failure([system('s'), user('task'), say('a')], { keepRecent: 10, targetBytes: 1000 })).toBe('nothing_to_shrink');
    expect(failure([], { targetBytes: 1000 })).toBe('nothing_to_shrink');
  });

  it('nothing_to_shrink when the summary would not make the request smaller', () => {
    const messages = [system('s'), user('task'), say('tiny'), say('a'), say('b')];
    expect(failure(messages, { keepRecent: 2, summaryReserveBytes: 1000 })).toBe('nothing_to_shrink');
  });
});

describe('purity', () => {
  it('never mutates its input, even when shrinking', () => {
    const messages = deepFreeze([
      system('s'),
      user([{ type: 'text', text: 'task' }, imagePart(10_000)]),
      say(big(20_000)),
      calls('c1', 'c2'),
      result('c1', [{ type: 'text', text: big(200_000) }, imagePart(100_000)]),
      result('c2', big(300_000)),
      user('go on'),
    ]);
    const snapshot = JSON.stringify(messages);
    const p = plan(messages, { keepRecent: 4, targetBytes: 50_000 });
    expect(p.replacedImages).toBe(1);
    expect(p.shrunkContents).toBe(2);
    expect(JSON.stringify(messages)).toBe(snapshot);
  });

  it('is deterministic', () => {
    const messages = [system('s'), user('task'), calls('c'), result('c', big(90_000)), say('done')];
    const input = { messages, keepRecent: 3, targetBytes: 20_000, summaryReserveBytes: 500 };
    expect(planCompaction(input)).toEqual(planCompaction(input));
  });
});
