import { describe, expect, it } from 'vitest';
import { compact, keptPrefixEnd, type CompactionResult } from '../../src/compaction/index.js';
import type { SizeTarget } from '../../src/compaction/size-target.js';
import { validateConfig } from '../../src/config/load.js';
import { responses } from '../../src/dialects/responses.js';
import type { MemoryEntry } from '../../src/memory/index.js';
import { rCall, rOutput, rReasoning, rSystem, rUser } from './conversations.js';
import { fakeSummarizer, settingsOf, type FakeSummarizer } from './fake-summarizer.js';

/*
 * The provider's own compaction as compact() uses it: what goes to its compaction call when a
 * remembered compaction came before (ours or the provider's), and what stands for the span when
 * the provider's call fails after a window of its own was remembered.
 */

let summarizer: FakeSummarizer;

const WINDOW = { type: 'compaction', id: 'cmp_new', encrypted_content: 'gAAAA-window' };
const OLD_WINDOW = { type: 'compaction', id: 'cmp_old', encrypted_content: 'gAAAA-old' };
const OUR_SUMMARY = {
  type: 'message',
  role: 'user',
  content: [{ type: 'input_text', text: '[compaction-gateway] The 4 earlier messages ... Summary:\n\nread a.ts' }],
};

/** The upstream as the summarizer: its own compaction answers `compactStatus`; a summary is always made. */
function provider(compactStatus: number) {
  summarizer = fakeSummarizer(
    responses.summarizer,
    (call) => {
      if (call.kind === 'compact')
        return compactStatus === 200
          ? { json: { object: 'response.compaction', output: [WINDOW] } }
          : { status: compactStatus, json: { error: { message: 'Invalid URL' } } };
      return { json: { output_text: 'NEW SUMMARY' } };
    },
    { model: 'gpt-6', providerCompaction: true },
  );
}

/** The task, then `rounds` reasoning + call + output rounds of 1 KB. */
function request(rounds: number) {
  const input = [rSystem('rules'), rUser('Review src/.')];
  for (let k = 0; k < rounds; k++) input.push(rReasoning(`${k}`), rCall(`c${k}`), rOutput(`c${k}`, 'o'.repeat(1_000)));
  return { model: 'gpt-6', input };
}

/** What memory would hold after an earlier compaction of the first `span` items after the prefix. */
function remembered(summaryItems: unknown[], strategy: MemoryEntry['strategy'], span: number): MemoryEntry {
  return {
    spanLength: span,
    spanDigest: 'x',
    pinnedOffsets: [],
    summary: summaryItems.length === 1 ? summaryItems[0] : null,
    summaryItems: summaryItems.length === 1 ? undefined : summaryItems,
    summaryText: strategy === 'provider' ? '' : 'read a.ts',
    summarizedCount: span,
    strategy,
    summarizerCalls: 1,
    bound: { freshFrom: 0, stripAll: false },
    fitBytes: 12_000,
    aimBytes: 12_000,
    createdAt: 0,
  };
}

async function run(recalled: MemoryEntry): Promise<Extract<CompactionResult, { outcome: 'compacted' }>> {
  const body = request(10);
  const bodyBytes = Buffer.byteLength(JSON.stringify(body));
  const target: SizeTarget = { fitBytes: 9_500, aimBytes: 9_500, bytesPerToken: 4, tokensBefore: bodyBytes / 4, source: 'stated' };
  const config = validateConfig({ compaction: { keepRecent: 12 }, summarizer: { providerCompaction: true } });
  const conversation = responses.read(body)!;
  expect(keptPrefixEnd(conversation)).toBe(2);
  const result = await compact(
    { dialect: responses, request: body, conversation, bodyBytes, recalled },
    settingsOf(config, target),
    summarizer,
  );
  if (result.outcome !== 'compacted') throw new Error(`not compacted: ${result.why}`);
  return result;
}

const sentInput = (r: { body: Buffer }) => JSON.parse(r.body.toString()).input as any[];

describe('the provider\u2019s window after an earlier compaction', () => {
  it('after our summary: the summary goes to /responses/compact with the items that aged out, and the window replaces both', async () => {
    provider(200);
    const r = await run(remembered([OUR_SUMMARY], 'summarize', 3));
    const [call] = summarizer.calls.filter((c) => c.kind === 'compact');
    expect(call.json.input[0]).toEqual(OUR_SUMMARY);
    expect(call.json.input.slice(1).some((i: any) => i.type === 'reasoning')).toBe(true);
    expect(r.strategy).toBe('provider');
    expect(sentInput(r).slice(0, 3)).toEqual([rSystem('rules'), rUser('Review src/.'), WINDOW]);
    expect(JSON.stringify(sentInput(r))).not.toContain('read a.ts');
  });

  it('after a window of its own: the old window goes first, and the new one replaces it', async () => {
    provider(200);
    const r = await run(remembered([OLD_WINDOW], 'provider', 3));
    expect(summarizer.calls.find((c) => c.kind === 'compact')!.json.input[0]).toEqual(OLD_WINDOW);
    expect(sentInput(r).filter((i) => i.type === 'compaction')).toEqual([WINDOW]);
  });

  it('the provider failing after a window of its own: the window stays as it was, our summary of what aged out after it', async () => {
    provider(404);
    const r = await run(remembered([OLD_WINDOW], 'provider', 3));
    expect(r).toMatchObject({ strategy: 'summarize', providerFailure: 'rejected' });
    const input = sentInput(r);
    expect(input[2]).toEqual(OLD_WINDOW);
    expect(JSON.stringify(input[3])).toContain('NEW SUMMARY');
    expect(r.newSpan!.summary.slice(0, 1)).toEqual([OLD_WINDOW]);
  });

  it('and once more after that ([window, our summary] remembered as summarize): the window is still kept', async () => {
    provider(404);
    const r = await run(remembered([OLD_WINDOW, OUR_SUMMARY], 'summarize', 3));
    const input = sentInput(r);
    expect(input[2]).toEqual(OLD_WINDOW);
    expect(input.filter((i) => i.type === 'compaction')).toHaveLength(1);
  });
});
