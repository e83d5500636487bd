import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { expect, it } from 'vitest';

const root = fileURLToPath(new URL('../..', import.meta.url));

it('npm run demo works offline and shows a rescued overflow', async () => {
  const { stdout } = await promisify(execFile)(process.execPath, ['--import', 'tsx', 'scripts/demo.ts'], {
    cwd: root,
    timeout: 30_000,
    env: { PATH: process.env.PATH ?? '' },
  });
  expect(stdout).toMatch(/the provider rejected it: 400 "This model's maximum context length is 2000 tokens/);
  expect(stdout).toMatch(
    /x-gateway-compaction: outcome=replayed, trigger=rejected, reason=context_length, limit=stated, memory=miss, strategy=summarize/,
  );
  // the next overflowing turn is sent compacted ahead with the remembered summary: no second
  // summarization (the summarizer calls counted are the rescue's, sized to the 2,000-token window)
  expect(stdout).toMatch(/x-gateway-compaction: outcome=compacted, trigger=proactive, limit=learned, memory=hit/);
  const [rescue, ahead] = stdout.split(/^turn 10:/m);
  const calls = (rescue.match(/the gateway asked the summarizer/g) ?? []).length;
  expect(calls).toBeGreaterThanOrEqual(1);
  expect(ahead).not.toMatch(/the gateway asked the summarizer/);
  expect(stdout).toContain(`gateway_summarizer_calls_total{upstream="default",model="demo-model"} ${calls}\n`);
  // Each turn prints its own rescue's line: the rescue's WARN at turn 9, the INFO of the turn sent compacted ahead at turn 10.
  expect(rescue).toMatch(/log: WARN upstream rejected the chat request as overlong .*, replayed once: the upstream answered 200\n/);
  expect(ahead).toMatch(/log: INFO chat request extends a conversation compacted before .*, sending it compacted\n/);
  expect(ahead).not.toMatch(/log: WARN/);
  // Only the series that are not zero.
  const series = stdout.split('\n').filter((l) => /^ {2}gateway_/.test(l));
  expect(series.length).toBeGreaterThan(5);
  expect(series.filter((l) => / 0$/.test(l))).toEqual([]);
  expect(stdout).toMatch(/gateway_memory_lookups_total\{result="hit"\} [1-9]/);
  expect(stdout).toMatch(/gateway_replays_total\{api="chat",result="success",upstream="default"\} [1-9]/);
  expect(stdout).not.toMatch(/-> [45]\d\d/);
});
