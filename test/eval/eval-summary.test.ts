import { Agent } from 'undici';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { chat } from '../../src/dialects/chat.js';
import { messages } from '../../src/dialects/messages.js';
import { evaluate, MODES, scoreCompaction, type CaseResult, type Evaluation } from '../../scripts/eval/evaluate.js';
import { generateScript, requestOf } from '../../scripts/eval/generate.js';
import { meter, tokensOf } from '../../scripts/eval/meter.js';
import { condensedItems, probesOf } from '../../scripts/eval/probes.js';
import { gateFailures, modeTable, recall, tally } from '../../scripts/eval/report.js';
import { EVAL_END, EVAL_START, withEvalSection } from '../../scripts/eval/section.js';
import { generatedCases, recordedCases } from '../../scripts/eval/sessions.js';
import { extractiveSummarizer, extractiveSummary, type ExtractiveSummarizer } from '../../scripts/eval/extractive.js';
import { startStandIn, type StandIn } from '../helpers/provider.js';

/*
 * npm run eval:summary, in-process: the figures it shows are computed right on a conversation
 * made by hand, and over the recorded agent sessions and a few generated ones every mode keeps
 * the paths and commands of what it condensed (the trail every summary carries).
 */

const SUMMARY =
  '[compaction-gateway] The 7 earlier messages of this conversation were condensed by the gateway because a test. Summary:\n\nRead src/session.ts. Ran pnpm vitest run test/session.test.ts.';

/** A task, a middle of seven items that goes (two reads, a failing test, a constraint), and a tail that stays. */
const handMade = {
  system: { role: 'system', content: 'rules' },
  task: { role: 'user', content: 'Fix the cache. Use pnpm, not npm.' },
  middle: [
    { role: 'assistant', content: 'Let me read `loadSession` first.', tool_calls: [callOf('c1', 'read_file', { path: 'src/session.ts' })] },
    { role: 'tool', tool_call_id: 'c1', content: 'export function loadSession() {}' },
    { role: 'assistant', content: null, tool_calls: [callOf('c2', 'bash', { command: 'pnpm vitest run test/session.test.ts' })] },
    {
      role: 'tool',
      tool_call_id: 'c2',
      content: "FAIL test/session.test.ts > loadSession\nTypeError: Cannot read properties of undefined (reading 'id')\nExit code: 1",
    },
    { role: 'user', content: "Thanks. Don't touch package.json." },
    { role: 'assistant', content: null, tool_calls: [callOf('c3', 'read_file', { path: 'src/cache.ts' })] },
    { role: 'tool', tool_call_id: 'c3', content: 'export class CacheStore {}' },
  ],
  tail: [
    { role: 'assistant', content: null, tool_calls: [callOf('c4', 'read_file', { path: 'src/tail.ts' })] },
    { role: 'tool', tool_call_id: 'c4', content: 'tail' },
  ],
};

function callOf(id: string, name: string, args: Record<string, unknown>) {
  return { id, type: 'function', function: { name, arguments: JSON.stringify(args) } };
}

const handOriginal = { model: 'm', messages: [handMade.system, handMade.task, ...handMade.middle, ...handMade.tail] };
const handCompacted = { model: 'm', messages: [handMade.system, handMade.task, { role: 'user', content: SUMMARY }, ...handMade.tail] };

describe('the figures of one compaction, on a conversation made by hand', () => {
  it('condenses exactly the middle, and reads its probes', () => {
    const condensed = condensedItems(chat, handOriginal.messages, handCompacted);
    expect(condensed).toEqual(handMade.middle);
    expect(probesOf(chat, condensed)).toEqual({
      paths: ['src/session.ts', 'test/session.test.ts', 'src/cache.ts'],
      commands: ['pnpm vitest run test/session.test.ts'],
      identifiers: ['loadSession'],
      errors: ['FAIL test/session.test.ts > loadSession'],
      constraints: ["Don't touch package.json."],
    });
  });

  it('scores what the summary says, and shows it as the table row a reader sees', () => {
    const scored = scoreCompaction(chat, handOriginal, handCompacted);
    expect(scored.condensedItems).toBe(7);
    expect(scored.score.paths).toEqual({ total: 3, kept: 2, missed: ['src/cache.ts'] });
    expect(scored.score.commands).toEqual({ total: 1, kept: 1, missed: [] });
    expect(scored.writtenBytes).toBe(Buffer.byteLength(SUMMARY));
    const result: CaseResult = {
      session: 'hand',
      api: 'chat',
      at: 1,
      mode: 'summarize',
      outcome: 'compacted',
      strategy: 'summarize',
      bytesBefore: 0,
      ...scored,
      summarizerCalls: 1,
      tokens: { input: 40, output: 10, reported: true },
    };
    const row = modeTable([result], ['summarize']).split('\n')[2];
    expect(row).toBe(
      `| summarize | 1/1 | summarize 1 | 7 | 2/3 (66.6%) | 1/1 (100%) | 0/1 (0%) | 0/1 (0%) | 0/1 (0%) | ${Buffer.byteLength(SUMMARY)} | 1 | 40 / 10 |`,
    );
    expect(gateFailures([result], { minRecall: 0.95, categories: ['paths', 'commands'], modes: ['summarize'] })).toEqual([
      'summarize: paths recall 66.6% (2/3) is under 95%',
    ]);
  });

  it('takes a kept turn merged with the summary (Messages) for kept, not condensed', () => {
    const toMessages = (m: Record<string, any>) =>
      m.role === 'tool'
        ? { role: 'user', content: [{ type: 'tool_result', tool_use_id: m.tool_call_id, content: m.content }] }
        : m.tool_calls
          ? {
              role: 'assistant',
              content: [
                ...(m.content ? [{ type: 'text', text: m.content }] : []),
                ...m.tool_calls.map((c: any) => ({
                  type: 'tool_use',
                  id: c.id,
                  name: c.function.name,
                  input: JSON.parse(c.function.arguments),
                })),
              ],
            }
          : m;
    const items = [handMade.task, ...handMade.middle, ...handMade.tail].map(toMessages);
    const kept = [items[0], messages.summaryItem(SUMMARY, 'user'), ...items.slice(-2)];
    const compacted = JSON.parse(messages.write({ model: 'm', messages: items }, kept).toString('utf8'));
    // The task and the summary went as one user turn.
    expect(compacted.messages).toHaveLength(3);
    expect(condensedItems(messages, items, compacted)).toEqual(items.slice(1, -2));
  });
});

describe('the stand-in summarizer and the meter', () => {
  it('keeps the first sentence of each message and no tool call', () => {
    const transcript =
      '<conversation>\n[user]\nFix it. Keep it small.\n\n[assistant]\n-> calls read_file({"path":"src/a.ts"}) [c1]\n\n[tool result c1]\nexport const a = 1;\nmore\n</conversation>';
    expect(extractiveSummary(transcript, 1000)).toBe('user: Fix it.\ntool result c1: export const a = 1;');
    expect(extractiveSummary(transcript, 10)).toBe('user: Fix ');
  });

  it('counts what the answers say they used, else characters / 4', () => {
    const wire = chat.summarizer;
    const said = {
      status: 200,
      request: '{}',
      answer: JSON.stringify({ choices: [{ message: { content: 'abcdefgh' } }], usage: { prompt_tokens: 7, completion_tokens: 3 } }),
    };
    const silent = {
      status: 200,
      request: JSON.stringify({ messages: [{ content: 'x'.repeat(40) }] }),
      answer: JSON.stringify({ choices: [{ message: { content: 'abcdefgh' } }] }),
    };
    expect(tokensOf([said], wire)).toEqual({ input: 7, output: 3, reported: true });
    expect(tokensOf([said, silent], wire)).toEqual({ input: 7 + 10, output: 3 + 2, reported: false });
  });
});

describe('generated sessions', () => {
  it('are the same bytes for the same seed, without Math.random', () => {
    const random = vi.spyOn(Math, 'random').mockImplementation(() => {
      throw new Error('Math.random is not for the generator');
    });
    try {
      const a = JSON.stringify(requestOf(generateScript(3, 30), 'chat'));
      expect(JSON.stringify(requestOf(generateScript(3, 30), 'chat'))).toBe(a);
      expect(JSON.stringify(requestOf(generateScript(4, 30), 'chat'))).not.toBe(a);
    } finally {
      random.mockRestore();
    }
  });

  it('read, write, edit, run commands that fail with an exit status, and add constraints', () => {
    const request = requestOf(generateScript(5, 40), 'chat');
    const probes = probesOf(chat, chat.read(request)!.items);
    expect(probes.paths.length).toBeGreaterThan(10);
    expect(probes.commands.length).toBeGreaterThan(3);
    expect(probes.errors.some((e) => /TypeError|error TS\d+|FAIL|Error:/.test(e))).toBe(true);
    expect(probes.constraints.length).toBeGreaterThan(0);
    expect(JSON.stringify(request)).toMatch(/Exit code: 1|exit status 1|Process exited with code 1/);
  });
});

describe('the section in BENCHMARKS.md', () => {
  it('is replaced alone, and added once', () => {
    const agents = '<!-- bench:agents start -->\n## Real agent sessions\n<!-- bench:agents end -->';
    const once = withEvalSection(`# Benchmarks\n\n${agents}\n`, 'first');
    expect(once).toBe(
      `# Benchmarks\n\n${agents}\n\n${EVAL_START}\n## What a compaction keeps (npm run eval:summary)\n\nfirst\n${EVAL_END}\n`,
    );
    const twice = withEvalSection(`${once}\n## Later, by hand\n`, 'second');
    expect(twice).toBe(`${once.replace('first', 'second')}\n## Later, by hand\n`);
  });
});

describe('over the recorded sessions and generated ones, every mode keeps the paths and commands it condensed', () => {
  let standIn: StandIn;
  let summarizer: ExtractiveSummarizer;
  const agent = new Agent();
  let evaluation: Evaluation;
  const watched = meter(agent);

  beforeAll(async () => {
    summarizer = extractiveSummarizer();
    standIn = await startStandIn({ summarizer: summarizer.answer });
    const cases = [
      ...recordedCases(['pi', 'opencode', 'codex', 'claude', 'claude-thinking', 'gemini']),
      ...generatedCases([
        { seed: 1, api: 'chat', steps: 30 },
        { seed: 7, api: 'messages', steps: 30 },
        { seed: 8, api: 'responses', steps: 30 },
      ]),
    ];
    evaluation = await evaluate(cases, { summarizer: { url: standIn.origin }, dispatcher: watched.dispatcher });
  });

  afterAll(async () => {
    await agent.close();
    await standIn?.close();
  });

  it('compacts every case, and counts the summarizer calls the stand-in answered', () => {
    expect(evaluation.results.filter((r) => r.outcome !== 'compacted')).toEqual([]);
    const calls = evaluation.results.reduce((n, r) => n + r.summarizerCalls, 0);
    expect(calls).toBe(summarizer.calls.length);
    expect(standIn.summarizerCalls()).toHaveLength(calls);
    expect(watched.take()).toHaveLength(calls);
  });

  it.each(MODES.flatMap((mode) => (['paths', 'commands'] as const).map((category) => ({ mode, category }))))(
    '$mode keeps at least 95% of the $category',
    ({ mode, category }) => {
      // Nothing of a category condensed (a mask keeps every call) is nothing lost.
      const t = tally(evaluation.results.filter((r) => r.mode === mode));
      const { kept, total, missed } = t.score[category];
      expect(
        recall(t, category) ?? 1,
        `${kept}/${total} kept; not kept: ${[...new Set(missed)].slice(0, 5).join(', ')}`,
      ).toBeGreaterThanOrEqual(0.95);
    },
  );
});
