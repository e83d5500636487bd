import { describe, expect, it } from 'vitest';
import { classifyResponse, classifyStreamEvent, type Verdict } from '../../src/overlong/classify.js';

// Wall-clock checks on hostile bodies. Kept apart from the mutation run (stryker.vitest.config.ts):
// a timing test turns every mutant it covers into a slow timeout. The limits themselves are
// pinned by test/overlong/limits.test.ts.
function isVerdict(v: Verdict): boolean {
  if (typeof v.rule !== 'string' || v.rule.length === 0) return false;
  if (!v.overlong) return v.overlong === false;
  return (v.reason === 'body_too_large' || v.reason === 'context_length') && typeof v.limits === 'object';
}

describe('stays fast on hostile bodies', () => {
  const cases: [string, string][] = [
    ['deep arrays', `${'['.repeat(200_000)}${']'.repeat(200_000)}`],
    ['deep objects', `${'{"error":'.repeat(50_000)}"x"${'}'.repeat(50_000)}`],
    ['deep JSON inside strings', nestedStrings(12)],
    ['1 MiB of digits', '1'.repeat(1 << 20)],
    ['1 MiB of one phrase prefix', 'maximum context length is '.repeat(40_000)],
    ['1 MiB of spaces then text', `${' '.repeat(1 << 20)}prompt is too long`],
    ['many small errors', JSON.stringify(Array.from({ length: 50_000 }, () => ({ error: { message: 'x', code: 'y' } })))],
    ['huge unterminated string', `{"error":{"message":"${'a'.repeat(1 << 20)}`],
    ['many SSE lines', 'data: x\n'.repeat(100_000)],
  ];

  it.each(cases)('%s', (_name, b) => {
    const started = process.cpuUsage();
    expect(isVerdict(classifyResponse({ status: 400, body: b }))).toBe(true);
    expect(isVerdict(classifyResponse({ status: 200, body: b }))).toBe(true);
    expect(isVerdict(classifyStreamEvent(b))).toBe(true);
    expect(cpuMs(started)).toBeLessThan(1500);
  });

  it('bails out of normal chunks without parsing them', () => {
    const chunk = '{"id":"chatcmpl-1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"hello world"}}]}';
    const started = process.cpuUsage();
    for (let i = 0; i < 100_000; i++) classifyStreamEvent(chunk);
    expect(cpuMs(started)).toBeLessThan(1000);
  });
});

/** CPU time this process spent since `started`, in ms: unlike wall time, not what other processes took. */
function cpuMs(started: NodeJS.CpuUsage): number {
  const used = process.cpuUsage(started);
  return (used.user + used.system) / 1000;
}

function nestedStrings(levels: number): string {
  let s: unknown = { error: { message: "This model's maximum context length is 10 tokens." } };
  for (let i = 0; i < levels; i++) s = { error: { message: `wrapped: ${JSON.stringify(s)}` } };
  return JSON.stringify(s);
}
